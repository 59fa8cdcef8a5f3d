import { describe, expect, it } from 'vitest';
import { isUnsafeProfileEnvName, unsafeProfileEnvNames, unsafeProfileEnvProblem } from './profile-env.js';

describe('unsafe profile env', () => {
  it('refuses loader and interpreter hooks, which would run the profile author’s code in the engine', () => {
    for (const name of [
      'LD_PRELOAD',
      'LD_LIBRARY_PATH',
      'LD_AUDIT',
      'LD_BIND_NOW',
      'DYLD_INSERT_LIBRARIES',
      'DYLD_LIBRARY_PATH',
      'NODE_OPTIONS',
      'NODE_PATH',
      'PYTHONPATH',
      'PYTHONSTARTUP',
      'PYTHONHOME',
      'PYTHONUSERBASE',
      'BASH_ENV',
      'ENV',
      'PERL5OPT',
      'PERL5LIB',
      'RUBYOPT',
      'RUBYLIB',
      'JAVA_TOOL_OPTIONS',
      '_JAVA_OPTIONS',
    ]) {
      expect(isUnsafeProfileEnvName(name), name).toBe(true);
    }
  });

  // The first list missed these: each runs code in the engine, set by whoever may add a model (issue 17 review).
  it.each([
    [
      'PYTHONWARNINGS',
      'a warning category is imported by name: PYTHONWARNINGS=all:0:antigravity.x:0:0 imports antigravity',
    ],
    ['BROWSER', 'the command webbrowser runs; with PYTHONWARNINGS importing antigravity, a shell command'],
    ['PYTHONPLATLIBDIR', 'where extension modules of the standard library are loaded from'],
    ['CUDA_INJECTION64_PATH', 'a library the CUDA driver loads into the process'],
    ['CUDA_INJECTION32_PATH', 'the same for 32-bit processes'],
    ['GCONV_PATH', 'iconv modules (shared libraries) glibc loads'],
    ['OPENSSL_CONF', 'a config that loads an engine or provider library'],
    ['OPENSSL_ENGINES', 'where OpenSSL engines are loaded from'],
    ['OPENSSL_MODULES', 'where OpenSSL 3 providers are loaded from'],
    ['SHELLOPTS', 'xtrace in every bash, which expands PS4'],
    ['PS4', 'expanded, command substitution included, before each traced command'],
    ['BASH_FUNC_ls%%', 'an exported bash function that replaces a command'],
    ['CC', 'the compiler Triton runs to build kernels'],
    ['CXX', 'the compiler PyTorch runs to build kernels'],
  ])('refuses %s (%s)', (name) => {
    expect(isUnsafeProfileEnvName(name), name).toBe(true);
    expect(
      unsafeProfileEnvNames({ OMP_NUM_THREADS: '4', [name]: 'x' }),
      `${name} is listed as unsafe in an env`,
    ).toEqual([name]);
  });

  it('lets engine tuning through', () => {
    for (const name of [
      'VLLM_ATTENTION_BACKEND',
      'NCCL_SOCKET_IFNAME',
      'OMP_NUM_THREADS',
      'CUDA_LAUNCH_BLOCKING',
      'HF_HUB_OFFLINE',
      'LLMGW_SIM_RECORD',
      'ENVIRONMENT',
      'PYTHONUNBUFFERED',
      'PYTHONSAFEPATH',
      'CUDA_MODULE_LOADING',
      'CCACHE_DIR',
      'MALLOC_ARENA_MAX',
    ]) {
      expect(isUnsafeProfileEnvName(name), name).toBe(false);
    }
  });

  it('lists the unsafe names of an env in order, and names the key and the way out in the problem', () => {
    expect(unsafeProfileEnvNames({ OMP_NUM_THREADS: '4', NODE_OPTIONS: '--import=x', LD_PRELOAD: '/x.so' })).toEqual([
      'NODE_OPTIONS',
      'LD_PRELOAD',
    ]);
    expect(unsafeProfileEnvNames({})).toEqual([]);
    expect(unsafeProfileEnvProblem('NODE_OPTIONS', 'set allow_unsafe_profile_env: true')).toMatch(
      /^NODE_OPTIONS .*allow_unsafe_profile_env: true$/,
    );
  });
});
