// Start records: one JSON line per process start, with the argv and the
// environment an engine adapter is responsible for (GPU visibility, NCCL and
// engine variables). Tests of adapters read them back to check the command
// line and environment a supervisor built, without a real vLLM or llama.cpp.
// Separate from the server because only processes record, never an
// in-process engine.
import { appendFileSync, existsSync, readFileSync } from 'node:fs';

/** One process start, as appended to the record file. */
export interface StartRecord {
  /** 'sim' for `llmgw engine sim`; the stand-in's name (vllm, llama-server, …) otherwise. */
  readonly program: string;
  /** The arguments after the program name. */
  readonly argv: readonly string[];
  /** The selected variables (see selectEnv); secrets appear as "<redacted>". */
  readonly env: Readonly<Record<string, string>>;
  readonly pid: number;
  readonly cwd: string;
  /** ISO 8601, wall clock. */
  readonly startedAt: string;
}

/** Variables an engine's behaviour depends on; anything else (PATH, HOME, …) is noise in a record. */
const RECORDED_ENV =
  /^(CUDA_|HIP_|ROCR_|NVIDIA_|VLLM_|NCCL_|GLOO_|SGLANG_|LLAMA_|GGML_|RAY_|HF_|HUGGING_FACE_|TORCH_|OMP_|LLMGW_|MASTER_ADDR$|MASTER_PORT$|WORLD_SIZE$|RANK$|LOCAL_RANK$)/;
/** Names that hold secrets: recorded as present, never with their value. */
const SECRET_ENV = /TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL/i;

/** The recorded subset of `env`, secrets redacted, keys sorted so records compare stably. */
export function selectEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(env).sort()) {
    const value = env[key];
    if (value === undefined || !RECORDED_ENV.test(key)) continue;
    out[key] = SECRET_ENV.test(key) ? '<redacted>' : value;
  }
  return out;
}

export function startRecord(program: string, argv: readonly string[], env: NodeJS.ProcessEnv): StartRecord {
  return {
    program,
    argv: [...argv],
    env: selectEnv(env),
    pid: process.pid,
    cwd: process.cwd(),
    startedAt: new Date().toISOString(),
  };
}

/** Appends one line; a single small append is atomic, so concurrent starts do not interleave. */
export function appendStartRecord(file: string, record: StartRecord): void {
  appendFileSync(file, `${JSON.stringify(record)}\n`);
}

/** The records in `file`, oldest first; [] when it does not exist yet. */
export function readStartRecords(file: string): StartRecord[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as StartRecord);
}
