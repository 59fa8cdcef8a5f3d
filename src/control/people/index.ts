// People with roles and their own tokens, and signing in through the
// company's identity provider (OpenID Connect): who may use the admin
// listener besides the one admin token.
export { People, principalOfPerson, tokenHash, DEFAULT_TOKEN_TTL_MS, type PersonInput } from './people.js';
export { registerPeopleAdmin, personView, ttlOf, type PeopleAdminDeps } from './admin.js';
