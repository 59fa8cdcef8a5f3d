// Teams: every API key belongs to one, and a team's allowed models and
// per-minute limits cap its keys'. A part of its own so that keys stay what
// they were (records, hashes, the store) and the narrowing of a key by its
// team is one pure function (teams.ts) the gateway never sees: it reads
// keys through TeamKeys, already narrowed.
export { DEFAULT_TEAM, excessOver, narrowKey, TEAM_NAME, teamView, type KeyAsk, type TeamRecord } from './teams.js';
export { defaultTeam, MemoryTeams, StoredTeams, type TeamStore } from './store.js';
export { TeamKeys } from './team-keys.js';
export { checkKeyTeam, registerTeamAdmin, type TeamAdminDeps } from './admin.js';
export { openTeams, type Teams } from './wire.js';
