import { describe, expect, it } from 'vitest';
import { CACHE_NAME_RE, cacheName, cacheNameOf, canonicalSource, parseSource } from './source.js';

const canon = (raw: string) => {
  const s = parseSource(raw);
  if (typeof s === 'string') throw new Error(s);
  return canonicalSource(s);
};

describe('weight sources', () => {
  it('makes spellings of the same weights canonical before hashing', () => {
    expect(canon('hf://Qwen/Qwen2.5-0.5B')).toBe('hf://qwen/qwen2.5-0.5b@main');
    expect(canon('hf://qwen/qwen2.5-0.5b@main/')).toBe('hf://qwen/qwen2.5-0.5b@main');
    expect(cacheNameOf('hf://Qwen/Qwen2.5-0.5B')).toBe(cacheNameOf('hf://qwen/qwen2.5-0.5b@main'));
    expect(cacheNameOf('hf://org/repo@v2')).not.toBe(cacheNameOf('hf://org/repo'));
    expect(cacheNameOf('hf://org/repo/Model.gguf')).not.toBe(cacheNameOf('hf://org/repo/model.gguf'));
    expect(canon('https://EXAMPLE.com:443/a/m.gguf')).toBe('https://example.com/a/m.gguf');
  });

  it('reads a percent-encoded revision with a slash', () => {
    expect(parseSource('hf://org/repo@refs%2Fpr%2F1/model.gguf')).toEqual({
      scheme: 'hf',
      repo: 'org/repo',
      revision: 'refs/pr/1',
      path: 'model.gguf',
    });
  });

  it('names a hash-pinned URL by its hash, so a rotating signed URL is one entry', () => {
    const hash = 'a'.repeat(64);
    expect(cacheNameOf(`https://cdn.example/m.gguf?sig=1#sha256=${hash}`)).toBe(
      cacheNameOf(`https://mirror.example/m.gguf?sig=2#sha256=${hash.toUpperCase()}`),
    );
  });

  it('gives file:// no cache name: it is used in place and never owned by llmgw', () => {
    const s = parseSource('file:///models/qwen/');
    expect(s).toEqual({ scheme: 'file', path: '/models/qwen' });
    expect(cacheName(s as never)).toBeNull();
  });

  it('cache names are 64 lowercase hex digits', () => {
    expect(cacheNameOf('hf://a/b')).toMatch(CACHE_NAME_RE);
  });

  it('refuses what it cannot read, saying what it wants', () => {
    expect(parseSource('hf://onlyorg')).toContain('names no repository');
    expect(parseSource('hf://org/repo/../x')).toContain('".." path segment');
    expect(parseSource('https://x/m#md5=abc')).toContain('#sha256=');
    expect(parseSource('http://x/m')).toContain('plain http');
    expect(parseSource('http://x/m', { allowHttp: true })).toMatchObject({ scheme: 'http' });
    expect(parseSource('file://relative/path')).toContain('absolute');
  });

  it('refuses hf:// names that would point the hub token at another hub path', () => {
    // hf://../../x was accepted and @huggingface/hub put `..` into /api/models/../.. with HF_TOKEN attached.
    const refused: [string, RegExp][] = [
      ['hf://../../x', /organisation "\.\." is not a hub name/],
      ['hf://org/..', /repository name "\.\." is not a hub name/],
      ['hf://%2e%2e/x', /organisation "%2e%2e"/],
      ['hf://org/a..b', /repository name "a\.\.b"/],
      ['hf://org/-x', /repository name "-x"/],
      ['hf://o\\rg/x', /organisation/],
      ['hf://org/repo@..', /revision has an empty, "\." or "\.\." segment/],
      ['hf://org/repo@refs%2F..%2Fx', /revision has an empty, "\." or "\.\." segment/],
      ['hf://org/repo@a%5Cb', /revision holds a control character or a backslash/],
      ['hf://org/repo/%2e%2e/x', /"\.\." path segment/],
      ['hf://org/repo/.%2E/x', /"\.\." path segment/],
      ['hf://org/repo/a/./b', /"\." or "\.\." path segment/],
      ['hf://org/repo/a//b', /empty/],
      ['hf://org/repo/a%2fb', /escaped separator/],
      ['hf://org/repo/a%5Cb', /escaped separator/],
      ['hf://org/repo/a\\b', /backslash/],
      ['hf://org/repo/a%zz', /badly percent-encoded/],
      ['hf://org/repo/a?b', /"\?" or "#"/],
    ];
    for (const [raw, why] of refused) {
      const parsed = parseSource(raw);
      expect(typeof parsed, `${raw} is refused`).toBe('string');
      expect(parsed, raw).toMatch(why);
    }
    for (const good of [
      'hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf',
      'hf://org_1/a.b-c_d@v1.0/sub/dir/x.safetensors',
      'hf://o/r@0123456789abcdef0123456789abcdef01234567',
    ]) {
      expect(typeof parseSource(good), `${good} is a hub name`).toBe('object');
    }
  });
});
