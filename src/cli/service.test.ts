// `llmgw install-service` as the operator runs it: what the command puts
// into the unit beyond what the rendering is given (src/service tests that).
import { describe, expect, it } from 'vitest';
import { renderEnvFile } from '../service/systemd.js';
import { runInstallService } from './service.js';

/** The unit `llmgw install-service <kind> --print` prints, its `Key=value` lines by key. */
function printed(kind: string): Map<string, string[]> {
  const lines: string[] = [];
  runInstallService(kind, { print: true }, (l) => lines.push(l));
  const out = new Map<string, string[]>();
  for (const line of lines.join('\n').split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (m) out.set(m[1]!, [...(out.get(m[1]!) ?? []), m[2]!]);
  }
  return out;
}

describe('llmgw install-service', () => {
  it("gives the control plane's node a 64 MiB young generation, as a default its environment file replaces", () => {
    const control = printed('control');
    expect(control.get('Environment')).toEqual(['"NODE_OPTIONS=--max-semi-space-size=64"']);
    expect(
      control.get('ExecStart')![0],
      "not on the command line, where it would win over the environment file's NODE_OPTIONS",
    ).not.toContain('semi-space');
    expect(renderEnvFile('control'), 'the file shows the flag to keep in a NODE_OPTIONS of its own').toMatch(
      /^#NODE_OPTIONS=--max-semi-space-size=64$/m,
    );
    expect(printed('agent').get('Environment'), 'an agent serves no requests').toBeUndefined();
  });
});
