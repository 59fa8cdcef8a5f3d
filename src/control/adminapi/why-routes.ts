// GET /api/v1/nodes/{id}: one node with the answers to "why is this node
// idle" and "what is this drain waiting for". Its own module, beside the
// list endpoint rather than in it, because the list is the seed's shape and
// pages through the fleet, while this answers a question about one node.
import type { FastifyInstance } from 'fastify';
import { LlmgwError } from '../../errors/index.js';
import { nodeDetailView, type ViewSources } from './views.js';
import { z } from 'zod';
import { needs, type ZodTypeProvider } from '../../http/index.js';

export function registerWhyRoutes(app: FastifyInstance, options: ViewSources): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.get(
    '/api/v1/nodes/:id',
    { ...needs('fleet.read'), schema: { params: z.object({ id: z.string() }) } },
    async (request) => {
      const id = request.params.id;
      const view = nodeDetailView(options, id);
      if (!view) throw new LlmgwError('LLMGW_NODE_NOT_FOUND', `no node "${id}"; llmgw ctl nodes lists the fleet`);
      return view;
    },
  );
}
