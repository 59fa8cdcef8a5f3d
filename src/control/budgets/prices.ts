// What tokens cost: the catalog's price per model (US dollars per million
// input and output tokens). Pure over the catalog it is given, read on every
// settled request, so it is a lookup and two multiplications.
import type { Prices } from './leases.js';

export interface ModelPrice {
  readonly input_per_million: number;
  readonly output_per_million: number;
}

/** The price of a model named by its name or alias; undefined = none set. */
export type PriceOf = (model: string) => ModelPrice | undefined;

/** What these tokens cost at this price, in US dollars. */
export function tokensCost(price: ModelPrice, promptTokens: number, completionTokens: number): number {
  return (promptTokens * price.input_per_million + completionTokens * price.output_per_million) / 1_000_000;
}

export function catalogPrices(priceOf: PriceOf): Prices {
  return {
    cost(model, promptTokens, completionTokens) {
      const price = priceOf(model);
      return price === undefined ? undefined : tokensCost(price, promptTokens, completionTokens);
    },
  };
}
