// Budgets per team and per key, in tokens and US dollars, per UTC day or
// month, and what tokens cost. A part of its own because it is the one
// place where spending meets the store: the gateway asks BudgetGate
// (leases.ts) from memory, and only the leases' background sync writes.
export {
  budgetWords,
  decideAdmission,
  decideSpend,
  leaseWanted,
  periodOf,
  renewalWanted,
  type BudgetRecord,
  type LeaseSnapshot,
  type SpendDecision,
  type SpendOutcome,
} from './budgets.js';
export {
  applySync,
  MemoryBudgetBook,
  StoredBudgetBook,
  type BudgetBook,
  type SyncOp,
  type SyncResult,
} from './book.js';
export { BudgetLeases, type BudgetLeasesOptions, type Prices } from './leases.js';
export { catalogPrices, tokensCost, type ModelPrice } from './prices.js';
export { registerBudgetAdmin, type BudgetAdminDeps } from './admin.js';
export { openBudgets, type Budgets } from './wire.js';
export { gpuHourlyPrice, parseGpuPrices, spreadGpuCost, type GpuPrices, type HeldReplica } from './gpu-cost.js';
export { GpuMeter, MemoryGpuBook, StoredGpuBook, type GpuBook, type GpuTotals } from './gpu-meter.js';
export { heldReplicas, openGpuMeter } from './gpu-wire.js';
