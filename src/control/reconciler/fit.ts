// The fleet a plan would see, asked "which nodes could take a shard of this
// model, per profile, and why not the others" (placement's fitTable): the
// same snapshot a pass places on, with every GPU a replica still holds taken,
// so a dry run and the next pass agree. Pure: the plan's input in, the table
// per model out.
import { fitTable, type ProfileFit } from '../placement/index.js';
import { classifyReplicas } from './classify.js';
import { holdGpus } from './hold-gpus.js';
import { requestBuilder } from './place-with-cap.js';
import { byId, compilePlanOptions, type PlanInput, type PlanModel, type PlanOptions } from './plan-types.js';

/** Per model name, its fit table on the fleet of `input` (its `models` are not used: `models` are the ones asked about). */
export function fitPass(
  input: Omit<PlanInput, 'models'>,
  models: readonly PlanModel[],
  options: PlanOptions = {},
): Map<string, ProfileFit[]> {
  const opts = compilePlanOptions(options);
  const replicas = [...input.replicas].sort(byId);
  const classified = classifyReplicas(replicas, input.nodes, input.now, opts);
  const nodes = holdGpus(input.nodes, classified.holdsGpus);
  const out = new Map<string, ProfileFit[]>();
  for (const m of models) {
    const live = classified.survivors.filter((r) => r.model === m.name);
    out.set(m.name, fitTable({ nodes }, requestBuilder(m, live)()));
  }
  return out;
}
