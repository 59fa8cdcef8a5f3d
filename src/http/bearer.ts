// Reading `Authorization: Bearer <token>` and comparing secrets, in one place
// for every listener and engine that takes a token: the admin and agent
// listeners, the router, the agent's management port, the engines llmgw
// ships. Separate from the listeners so each checks a token the same way,
// and no one re-learns that a plain `===` leaks a secret's length and
// prefix through timing.
import { createHash, timingSafeEqual } from 'node:crypto';

// The scheme is case-insensitive (RFC 9110 §11.1); the token runs from the
// first to the last non-blank character, so surrounding blanks are not part
// of it, and a secret with a space inside still reads whole.
const BEARER = /^Bearer[ \t]+(\S(?:.*\S)?)[ \t]*$/i;

/** The token of an `Authorization: Bearer …` header; null = no header, another scheme, or no token. */
export function bearerToken(authorization: string | undefined): string | null {
  const match = authorization === undefined ? null : BEARER.exec(authorization);
  return match ? match[1]! : null;
}

/** True when `given` equals `wanted`. Both are hashed first, so neither length nor content leaks through timing. */
export function sameSecret(given: string, wanted: string): boolean {
  return timingSafeEqual(createHash('sha256').update(given).digest(), createHash('sha256').update(wanted).digest());
}
