// GET /api/v1/shadows: each shadowed model against its candidate, from the
// gateway's comparison (src/gateway/traffic/board.ts). The comparison is
// this control plane's memory, of the requests its own client listener
// took, so the answer names the instance; with several control planes each
// shows its own share of the traffic.
import type { FastifyInstance } from 'fastify';
import type { ShadowsView } from '../../api/traffic-types.js';
import type { RoutedModels, ShadowBoard } from '../../gateway/index.js';
import { needs } from '../../http/index.js';

export interface ShadowsApiDeps {
  board: ShadowBoard;
  /** The catalog, for the share each model's shadow has now. */
  catalog: RoutedModels;
  /** This control plane's instance id, as GET /api/v1/control-planes lists it. */
  instance: string;
}

export function shadowsView(deps: ShadowsApiDeps): ShadowsView {
  const shareOf = (model: string, candidate: string) => {
    const shadow = deps.catalog.resolve(model)?.shadow;
    if (!shadow) return undefined;
    const named = deps.catalog.resolve(shadow.model)?.name ?? shadow.model;
    return named === candidate ? shadow.share : undefined;
  };
  const shadows = deps.board.views(shareOf);
  // A shadow configured but not yet drawn is listed too, with nothing counted, so an operator sees it is on.
  for (const m of deps.catalog.models()) {
    if (!m.shadow) continue;
    const candidate = deps.catalog.resolve(m.shadow.model)?.name ?? m.shadow.model;
    if (shadows.some((s) => s.model === m.name && s.candidate === candidate)) continue;
    const empty = { requests: 0, errors: 0, prompt_tokens: 0, completion_tokens: 0 };
    shadows.push({
      model: m.name,
      candidate,
      share: m.shadow.share,
      copied: 0,
      in_flight: 0,
      dropped: { busy: 0, no_replica: 0, not_served: 0 },
      primary: { ...empty },
      shadow: { ...empty },
    });
  }
  shadows.sort((a, b) => a.model.localeCompare(b.model) || a.candidate.localeCompare(b.candidate));
  return { shadows, instance: deps.instance, samples_kept: deps.board.samplesKept };
}

export function registerShadowsApi(app: FastifyInstance, deps: ShadowsApiDeps): void {
  app.get('/api/v1/shadows', needs('fleet.read'), async (): Promise<ShadowsView> => shadowsView(deps));
}
