// The OIDC keys and the group-to-role mapping, table-tested without a provider.
// Guards against a person in several groups getting the weaker role (or a
// team-admin's teams from groups that gave a stronger one), and against a
// mistyped mapping that would silently let nobody, or everybody, in.
import { describe, expect, it } from 'vitest';
import { compileControlOptions } from './index.js';
import { roleOfGroups } from './oidc.js';

const BASE = {
  oidc_issuer: 'https://login.example.com',
  oidc_client_id: 'llmgw',
  oidc_redirect_url: 'https://gw.example.com:8081/login/oidc/callback',
};

describe('oidc config', () => {
  it('is off without an issuer, and compiles a full one', () => {
    expect(compileControlOptions({}).oidc).toBeNull();
    const c = compileControlOptions({ ...BASE, oidc_group_roles: 'a=admin, v=viewer, ml=team-admin:ml' }).oidc!;
    expect(c.scopes).toBe('openid profile email groups');
    expect(c.clientSecret).toBeNull();
    expect([...c.groupRoles]).toEqual([
      ['a', { role: 'admin', team: null }],
      ['v', { role: 'viewer', team: null }],
      ['ml', { role: 'team-admin', team: 'ml' }],
    ]);
  });

  it.each([
    [{ oidc_group_roles: 'a=root' }, /"a=root" is not group=role/],
    [{ oidc_group_roles: 'a=team-admin' }, /"a=team-admin" is not group=role/],
    [{ oidc_group_roles: 'a=viewer:ml' }, /"a=viewer:ml" is not group=role/],
    [{}, /oidc_group_roles is needed/],
    [{ oidc_group_roles: 'a=viewer', oidc_redirect_url: undefined }, /oidc_redirect_url is needed/],
  ])('refuses %j', (over, problem) => {
    expect(() => compileControlOptions({ ...BASE, ...over })).toThrow(problem);
  });
});

describe('roleOfGroups', () => {
  const map = compileControlOptions({
    ...BASE,
    oidc_group_roles: 'admins=admin,sre=operator,staff=viewer,ml=team-admin:ml,cv=team-admin:cv',
  }).oidc!.groupRoles;
  it.each([
    [[], null],
    [['nobody'], null],
    [['staff'], { role: 'viewer', teams: [] }],
    [['staff', 'sre'], { role: 'operator', teams: [] }],
    [['ml', 'staff'], { role: 'viewer', teams: [] }],
    [['ml', 'cv', 'other'], { role: 'team-admin', teams: ['ml', 'cv'] }],
    [['admins', 'ml'], { role: 'admin', teams: [] }],
  ])('%j gives %j', (groups, want) => {
    expect(roleOfGroups(groups, map)).toEqual(want);
  });
});
