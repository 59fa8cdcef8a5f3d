// GET /api/v1/events on the admin listener: the events log, newest first,
// in the shape src/api/types.ts declares for ctl and the dashboard.
import type { FastifyInstance } from 'fastify';
import type { EventView, EventsView } from '../../api/types.js';
import { LlmgwError } from '../../errors/index.js';
import { type Events, type FleetEvent, MAX_EVENT_LIST } from './events.js';
import { z } from 'zod';
import { needs, type ZodTypeProvider } from '../../http/index.js';

export function registerEventsApi(app: FastifyInstance, options: { events: Events }): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/api/v1/events',
    {
      ...needs('fleet.read'),
      schema: {
        querystring: z.object({
          model: z.string().optional(),
          limit: z.string().optional(),
          after: z.string().optional(),
        }),
      },
    },
    async (request): Promise<EventsView> => {
      const q = request.query;
      const limit =
        q.limit === undefined || q.limit === '' ? undefined : wholeNumber('limit', q.limit, 1, MAX_EVENT_LIST);
      const after =
        q.after === undefined || q.after === '' ? undefined : wholeNumber('after', q.after, 0, Number.MAX_SAFE_INTEGER);
      const list = await options.events.list({
        ...(q.model ? { model: q.model } : {}),
        ...(limit === undefined ? {} : { limit }),
        ...(after === undefined ? {} : { afterId: after }),
      });
      return { events: list.map(eventView) };
    },
  );
}

export function eventView(e: FleetEvent): EventView {
  return {
    id: e.id,
    at: new Date(e.atMs).toISOString(),
    kind: e.kind,
    ...(e.model === null ? {} : { model: e.model }),
    ...(e.node === null ? {} : { node: e.node }),
    ...(e.replica === null ? {} : { replica: e.replica }),
    ...(e.from === null ? {} : { from: e.from }),
    ...(e.to === null ? {} : { to: e.to }),
    message: e.message,
  };
}

function wholeNumber(name: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) {
    throw new LlmgwError(
      'LLMGW_BAD_REQUEST',
      `${name} must be a whole number from ${min} to ${max}; got ${JSON.stringify(text)}`,
    );
  }
  return n;
}
