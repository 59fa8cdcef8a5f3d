// fetch() for the hub's API calls (@huggingface/hub), with redirects followed
// by hand under the same rule as file downloads (address-guard.ts): the
// library follows them itself otherwise, and its one-byte probe of a file
// even hands back where a redirect went as the URL to download from. Each
// hop is resolved and checked before it is requested; HF_TOKEN (the
// library's Authorization header) goes only to the origin it was meant for.
// The connection is made by fetch() itself, so unlike a file download a name
// that resolves differently a moment later is not pinned; the hub's own
// origin is the operator's choice (HF_ENDPOINT).
import { LlmgwError } from '../../errors/index.js';
import {
  type AddressClass,
  addressesOf,
  forbiddenHop,
  type HostLookup,
  refusedAddress,
  sourceClasses,
} from './address-guard.js';

const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

export function guardedHubFetch(inner: typeof fetch, hubUrl: string, lookup: HostLookup): typeof fetch {
  return async (input, init) => {
    let url = new URL(input instanceof Request ? input.url : String(input));
    const headers = new Headers(init?.headers);
    let method = init?.method ?? 'GET';
    let body = init?.body;
    let hubClasses: Set<AddressClass> | null = null;
    for (let hop = 0; ; hop++) {
      const res = await inner(url.href, {
        ...init,
        method,
        headers,
        ...(body === undefined ? {} : { body }),
        redirect: 'manual',
      });
      const location = res.headers.get('location');
      if (!REDIRECT_STATUSES.has(res.status) || location === null) return res;
      await res.body?.cancel().catch(() => {});
      if (hop === MAX_REDIRECTS)
        throw new LlmgwError(
          'LLMGW_FETCH_FAILED',
          `the hub at ${hubUrl} redirected more than ${MAX_REDIRECTS} times; check HF_ENDPOINT`,
        );
      const next = new URL(location, url);
      if (next.protocol !== 'https:' && next.protocol !== 'http:') {
        throw new LlmgwError(
          'LLMGW_FETCH_FAILED',
          `the hub at ${hubUrl} redirected to a ${next.protocol} URL; only http(s) is followed`,
        );
      }
      if (next.protocol === 'http:' && url.protocol === 'https:') {
        throw new LlmgwError(
          'LLMGW_FETCH_FAILED',
          `the hub at ${hubUrl} redirected to plain http (${next.origin}); refusing to leave TLS`,
        );
      }
      let hopAddresses: string[];
      try {
        hubClasses ??= sourceClasses(await addressesOf(new URL(hubUrl), lookup));
        hopAddresses = await addressesOf(next, lookup);
      } catch (err) {
        const why = (err as { code?: string }).code ?? (err as Error).message;
        throw new LlmgwError(
          'LLMGW_FETCH_FAILED',
          `could not resolve ${next.hostname} (${why}) to check where the hub's redirect leads`,
          { cause: err },
        );
      }
      const bad = forbiddenHop(hopAddresses, hubClasses);
      if (bad) {
        throw new LlmgwError(
          'LLMGW_FETCH_FAILED',
          `the hub at ${hubUrl} redirected to ${next.origin}, which reaches ${refusedAddress(bad)}; a hub's redirect is followed only to public addresses or the hub's own kind; check HF_ENDPOINT`,
          { context: { redirectOrigin: next.origin, address: bad.address, addressClass: bad.cls } },
        );
      }
      if (next.origin !== url.origin) headers.delete('authorization');
      // As fetch() does: a 303, or a 301/302 answering a POST, is followed with a GET and no body.
      if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
        headers.delete('content-type');
      }
      url = next;
    }
  };
}
