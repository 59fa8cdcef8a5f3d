// Guards against a node naming itself with escape sequences or newlines: its
// hostname, labels, GPU names, mount points and engine names were taken as
// sent and printed raw on the operator's terminal by llmgw ctl.
import { describe, expect, it } from 'vitest';
import { describeIssues } from '../validation/index.js';
import { JoinRequestSchema } from './agent-api.js';
import { NodeReportSchema } from './node-report.js';
import { controlCharIn, octalEscapeControls } from './text.js';

const JOIN = { join_token: 't', node_id: 'n1' };

function joinProblems(extra: Record<string, unknown>): string[] {
  const parsed = JoinRequestSchema.safeParse({ ...JOIN, ...extra });
  return parsed.success ? [] : describeIssues(JoinRequestSchema, parsed.error);
}

function reportProblems(report: Record<string, unknown>): string[] {
  const parsed = NodeReportSchema.safeParse(report);
  return parsed.success ? [] : describeIssues(NodeReportSchema, parsed.error);
}

describe('names on the wire', () => {
  it('finds C0, DEL and C1, and nothing in printable text', () => {
    expect(controlCharIn('gpu-node-01.example ÄÖ 日本')).toBeNull();
    expect(controlCharIn('a\x1bb')).toBe('U+001B');
    expect(controlCharIn('a\nb')).toBe('U+000A');
    expect(controlCharIn('a\x7f')).toBe('U+007F');
    expect(controlCharIn('a\u009b')).toBe('U+009B');
  });

  it('refuses a join whose hostname, label key or label value holds a control character, naming the field', () => {
    expect(joinProblems({ hostname: 'h\x1b]0;pwned\x07' }).join('; ')).toMatch(
      /hostname.*control character \(U\+001B\)/,
    );
    expect(joinProblems({ labels: { 'pool\n': 'a' } }).join('; ')).toBe(
      'labels["pool\\n"]: label key holds a control character (U+000A); names and labels must be printable text',
    );
    expect(joinProblems({ labels: { pool: 'a\r' } }).join('; ')).toMatch(
      /labels\.pool.*label value holds a control character \(U\+000D\)/,
    );
    expect(joinProblems({ agent_version: '1.0\x1b[2J' }).join('; ')).toMatch(/agent_version.*control character/);
    expect(
      joinProblems({ hostname: 'gpu-01', labels: { pool: 'a100', zone: 'eu west' }, agent_version: '0.1.0' }),
      'honest values pass',
    ).toEqual([]);
  });

  it('refuses a report whose GPU name, mount point, filesystem or engine name holds one, and keeps free text', () => {
    expect(reportProblems({ gpus: [{ index: 0, name: 'NVIDIA H100\x1b]52;c;cm0gLXJmIH4=\x07' }] }).join('; ')).toMatch(
      /gpus\[0\]\.name.*GPU name holds a control character/,
    );
    expect(reportProblems({ disks: [{ mount_point: '/data\n/fake' }] }).join('; ')).toMatch(
      /disks\[0\]\.mount_point.*mount point holds/,
    );
    expect(reportProblems({ disks: [{ mount_point: '/data', fs_type: 'ext4\x07' }] }).join('; ')).toMatch(
      /fs_type.*filesystem type holds/,
    );
    expect(reportProblems({ engines: [{ name: 'vllm\x1b[2J' }] }).join('; ')).toMatch(
      /engines\[0\]\.name.*engine name holds/,
    );
    expect(reportProblems({ hostname: 'h\x1b' }).join('; ')).toMatch(/hostname.*control character/);
    // Sentences and paths may hold anything: ctl escapes them where it prints them.
    expect(
      reportProblems({
        gpus: [{ index: 0, name: 'NVIDIA A100', problems: ['line one\nline two'] }],
        gpu_probe_error: 'nvidia-smi:\nfailed',
        disks: [{ mount_point: '/', paths: ['/odd\tdir'] }],
      }),
    ).toEqual([]);
  });

  it('writes a mount point that really holds a newline as the kernel does, so an honest report passes', () => {
    // escaped-spaces-cifs-edge-cases.txt in the mountinfo fixtures has such a mount.
    const reported = octalEscapeControls(`/tmp/newline\ntab\tspace backslash\\quote1'quote2"`);
    expect(reported).toBe(`/tmp/newline\\012tab\\011space backslash\\quote1'quote2"`);
    expect(reportProblems({ disks: [{ mount_point: reported }] })).toEqual([]);
  });
});
