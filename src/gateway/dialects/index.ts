// The API dialects the gateway serves, each a folder beside this file (see
// dialect.ts for what one is). registerRouter mounts every dialect listed
// here on the client listener; adding a dialect is its folder and one line
// below. OpenAI's comes first: it is the engines' own, and the shape of any
// refusal made before a route is known.
import { anthropic } from './anthropic/index.js';
import type { Dialect } from '../core/dialect.js';
import { openai } from './openai/index.js';
import { responses } from './responses/index.js';

export const DIALECTS: readonly Dialect[] = [openai, anthropic, responses];

export { openai, OPENAI_TURN } from './openai/index.js';
export {
  routeConfig,
  type Dialect,
  type DialectHost,
  type DialectRouteConfig,
  type DialectTurn,
} from '../core/dialect.js';
