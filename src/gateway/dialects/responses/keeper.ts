// The Responses API's kept answers: a finished Response written to the
// response store (when the request asks, `store`, and there is a store) for
// previous_response_id, item references and GET/DELETE /v1/responses/{id}.
// A write in flight is remembered (`keeping`) until the store has it, so a
// continuation sent the moment its predecessor's answer ends waits for the
// write instead of missing it. Apart from the relays, which only hand it a
// finished Response, and from the routes, which read it.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { z } from 'zod';
import { listOrderQuery, wholeNumberQuery } from '../../../http/index.js';
import type { ErrorCode } from '../../../errors/index.js';
import type { ApiKeyRecord, ResponseStore, RoutedModel, StoredResponse } from '../../ports/index.js';
import type { ResponsesRelayCall } from './relay.js';

/** GET /v1/responses/{id}/input_items's query, declared on its route: a page of up to 100 items, newest first by default. */
export const InputItemsQuery = z.object({
  limit: wholeNumberQuery(100, 20),
  order: listOrderQuery,
  after: z.string().optional(),
});
export type InputItemsQuery = z.output<typeof InputItemsQuery>;

/** How a refusal is sent (the gateway's refuse: logged, counted, in the route's dialect). */
export type Refuse = (
  reply: FastifyReply,
  status: number,
  code: ErrorCode,
  message: string,
  param?: string | null,
) => FastifyReply;

/** OpenAI's words for an id it has no response for (GET and DELETE). */
function responseNotFound(id: string): string {
  return `Response with id '${id}' not found. Responses are kept per API key (with store: true, the default) until they expire or are deleted.`;
}

/** Where a response being kept waits in `keeping`: per key, as the store keeps it. */
function keepingSlot(keyId: string, id: string): string {
  return `${keyId}\0${id}`;
}

export class ResponseKeeper {
  /**
   * Responses being kept, by key and id (the gateway's, and the engine's
   * where it differs), until the store has them. No entry = nothing pending.
   */
  private readonly keeping = new Map<string, Promise<void>>();

  /** `store` null: nothing is kept; `store` is ignored, and no id is ever found. */
  constructor(
    private readonly store: ResponseStore | null,
    private readonly logger: Logger,
    private readonly now: () => number,
    readonly refuse: Refuse,
  ) {}

  /** Waits for the writes in flight: their clients have the answers and may continue from them. */
  async close(): Promise<void> {
    await Promise.all(this.keeping.values());
  }

  /**
   * A finished Response kept for previous_response_id and GET, when the
   * request asks (`store`, default true) and there is a store. Called before
   * the client has the answer's last byte; a lookup of the id meanwhile
   * waits for the write (see `keeping`). A write that fails is logged: the
   * client has its answer, only the continuation by id is lost.
   */
  keep(
    ex: { readonly id: string; readonly key: ApiKeyRecord | null },
    call: ResponsesRelayCall,
    model: RoutedModel,
    response: Record<string, unknown>,
  ): void {
    const store = this.store;
    if (!store || !call.store) return;
    // Kept under the router's own id whatever the engine answered: an engine's ids (predictable, or the same from two
    // engines) never name another key's response. The engine's id, where it differs, is kept beside it for continuing.
    const id = call.id;
    const engineId = typeof response.id === 'string' && response.id !== id ? response.id : null;
    const keyId = ex.key?.id ?? 'anonymous';
    // An engine serving the API natively was sent store false and no previous id: the kept copy says what the client asked.
    const kept = { ...response, id, store: true, previous_response_id: call.previousResponseId };
    const slots = [keepingSlot(keyId, id), ...(engineId === null ? [] : [keepingSlot(keyId, engineId)])];
    const put = store
      .put({
        id,
        keyId,
        engineId,
        model: model.name,
        createdAtMs: this.now(),
        response: kept,
        items: call.itemsAfter(kept),
      })
      .catch((err: unknown) =>
        this.logger.error(
          { err, request: ex.id, response: id },
          'a Responses answer could not be kept; continuing from it by id will not find it',
        ),
      )
      .finally(() => {
        for (const slot of slots) if (this.keeping.get(slot) === put) this.keeping.delete(slot);
      });
    for (const slot of slots) this.keeping.set(slot, put);
  }

  /**
   * The output items of this key's kept responses that `itemIds` name (for
   * item_reference inputs), once the responses being kept now are written:
   * the AI SDK sends its next step the moment an answer ends.
   */
  async keptItems(key: ApiKeyRecord | null, itemIds: readonly string[]): Promise<ReadonlyMap<string, unknown>> {
    const store = this.store;
    if (!store) return new Map();
    await Promise.all(this.keeping.values());
    return store.findItems(key?.id ?? 'anonymous', itemIds);
  }

  /** A kept response of this key, once any write of it in flight is done; undefined when there is none (or no store). */
  async keptResponse(key: ApiKeyRecord | null, id: string): Promise<StoredResponse | undefined> {
    const store = this.store;
    if (!store) return undefined;
    const keyId = key?.id ?? 'anonymous';
    await this.keeping.get(keepingSlot(keyId, id));
    return store.get(keyId, id);
  }

  /** GET /v1/responses/{id}: the kept Response, if this key kept it. */
  async getResponse(id: string, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const kept = await this.keptResponse(request.apiKey, id);
    if (!kept) return this.refuse(reply, 404, 'LLMGW_NOT_FOUND', responseNotFound(id));
    return kept.response;
  }

  /**
   * GET /v1/responses/{id}/input_items: what the response answered (the
   * conversation before its output), as OpenAI lists it: newest first
   * unless `order=asc`, `limit` items (1-100, default 20) after the item
   * `after`. An item kept without an id (a message as the client sent it)
   * is listed under one made from the response's id and its place, the
   * same on every call, so paging by it works.
   */
  async listInputItems(
    id: string,
    query: InputItemsQuery,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<unknown> {
    const kept = await this.keptResponse(request.apiKey, id);
    if (!kept) return this.refuse(reply, 404, 'LLMGW_NOT_FOUND', responseNotFound(id));
    const { limit, order } = query;
    const output = Array.isArray(kept.response.output) ? kept.response.output.length : 0;
    const items = kept.items.slice(0, Math.max(0, kept.items.length - output)).map((item, i) => {
      const o = item as Record<string, unknown>;
      return typeof o.id === 'string' ? o : { ...o, id: `item_${kept.id.replace(/^resp_/, '')}_${i}` };
    });
    if (order === 'desc') items.reverse();
    let from = 0;
    if (query.after !== undefined) {
      const at = items.findIndex((item) => item.id === query.after);
      if (at === -1)
        return this.refuse(
          reply,
          400,
          'LLMGW_BAD_REQUEST',
          `after: response ${id} has no input item ${query.after}`,
          'after',
        );
      from = at + 1;
    }
    const data = items.slice(from, from + limit);
    return {
      object: 'list',
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: from + limit < items.length,
    };
  }

  /** DELETE /v1/responses/{id}: as OpenAI answers it. */
  async deleteResponse(id: string, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const store = this.store;
    const keyId = request.apiKey?.id ?? 'anonymous';
    await this.keeping.get(keepingSlot(keyId, id));
    const deleted = store ? await store.delete(keyId, id) : false;
    if (!deleted) return this.refuse(reply, 404, 'LLMGW_NOT_FOUND', responseNotFound(id));
    return { id, object: 'response', deleted: true };
  }
}
