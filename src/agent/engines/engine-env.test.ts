import { describe, expect, it } from 'vitest';
import { engineBaseEnv, isPassedToEngine } from './engine-env.js';

describe('engineBaseEnv', () => {
  it("keeps the agent's secrets out of an engine's environment: join token, HF token, admin token, anything unnamed", () => {
    const env = engineBaseEnv({
      PATH: '/usr/bin',
      HOME: '/home/llmgw',
      LLMGW_JOIN_TOKEN: 'join-secret',
      LLMGW_ADMIN_TOKEN: 'admin-secret',
      HF_TOKEN: 'hf_secret',
      HF_HOME: '/data/hf',
      HUGGING_FACE_HUB_TOKEN: 'hf_secret',
      AWS_SECRET_ACCESS_KEY: 'aws',
      SECRET_CANARY: 'canary',
      NODE_OPTIONS: '--import=data:text/javascript,x',
      PYTHONPATH: '/evil',
    });
    expect(env, 'only PATH and HOME of these may reach an engine').toEqual({ PATH: '/usr/bin', HOME: '/home/llmgw' });
  });

  it('passes what engines need: locale, temp dir, the GPU stack and the libraries path the node operator set', () => {
    const wanted = {
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      TMPDIR: '/scratch',
      CUDA_HOME: '/usr/local/cuda',
      NVIDIA_DRIVER_CAPABILITIES: 'compute,utility',
      NCCL_SOCKET_IFNAME: 'ib0',
      LD_LIBRARY_PATH: '/usr/local/cuda/lib64',
      USER: 'llmgw',
      TZ: 'UTC',
    };
    expect(engineBaseEnv(wanted)).toEqual(wanted);
  });

  it('drops unset values and does not pass a name that only starts like an allowed one', () => {
    expect(engineBaseEnv({ PATH: undefined, HOMEBREW_GITHUB_TOKEN: 'x', PATHEXT: 'y' })).toEqual({});
    expect(isPassedToEngine('CUDA_VISIBLE_DEVICES')).toBe(true);
    expect(isPassedToEngine('LLMGW_AGENT_STATE_DIR'), 'the agent adds its marks itself, after the allowlist').toBe(
      false,
    );
  });
});
