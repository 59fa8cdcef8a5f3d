import { describe, expect, it } from 'vitest';
import { isUnsafeProfileEnvName, unsafeProfileEnvNames, unsafeProfileEnvProblem } from './profile-env.js';

describe('unsafe profile env', () => {
  it('refuses loader and interpreter hooks, which would run the profile author’s code in the engine', () => {
    for (const name of [
      'LD_PRELOAD', 'LD_LIBRARY_PATH', 'LD_AUDIT', 'LD_BIND_NOW', 'DYLD_INSERT_LIBRARIES', 'DYLD_LIBRARY_PATH',
      'NODE_OPTIONS', 'NODE_PATH', 'PYTHONPATH', 'PYTHONSTARTUP', 'PYTHONHOME', 'PYTHONUSERBASE', 'BASH_ENV', 'ENV',
      'PERL5OPT', 'PERL5LIB', 'RUBYOPT', 'RUBYLIB', 'JAVA_TOOL_OPTIONS', '_JAVA_OPTIONS',
    ]) {
      expect(isUnsafeProfileEnvName(name), name).toBe(true);
    }
  });

  it('lets engine tuning through', () => {
    for (const name of ['VLLM_ATTENTION_BACKEND', 'NCCL_SOCKET_IFNAME', 'OMP_NUM_THREADS', 'CUDA_LAUNCH_BLOCKING', 'HF_HUB_OFFLINE', 'LLMGW_SIM_RECORD', 'ENVIRONMENT', 'PYTHONUNBUFFERED']) {
      expect(isUnsafeProfileEnvName(name), name).toBe(false);
    }
  });

  it('lists the unsafe names of an env in order, and names the key and the way out in the problem', () => {
    expect(unsafeProfileEnvNames({ OMP_NUM_THREADS: '4', NODE_OPTIONS: '--import=x', LD_PRELOAD: '/x.so' })).toEqual(['NODE_OPTIONS', 'LD_PRELOAD']);
    expect(unsafeProfileEnvNames({})).toEqual([]);
    expect(unsafeProfileEnvProblem('NODE_OPTIONS', 'set allow_unsafe_profile_env: true')).toMatch(/^NODE_OPTIONS .*allow_unsafe_profile_env: true$/);
  });
});
