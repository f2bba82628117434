/**
 * The demo agent's tools, run against the made-up project in memory: `read_file`,
 * `run_command` (a handful of shell commands simulated over the files: find, ls, grep, wc,
 * head, cat, npm test, tsc, git diff/status) and `edit_file`. Outputs look and weigh like
 * the real thing — a failing test run is ~10 KB — which is what the compaction engine is
 * about. Nothing touches the disk.
 */
import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import { RETRY_FIX } from './plan';
import type { ProjectFiles } from './project';

export interface ToolOutput {
  text: string;
  isError: boolean;
}

export const DEMO_TOOLS: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'read_file',
      description: 'Read a text file of the project.',
      parameters: { type: 'object', properties: { path: { type: 'string', description: 'Path relative to the project root' } }, required: ['path'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'run_command',
      description: 'Run a shell command in the project root and return its output.',
      parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'edit_file',
      description: 'Replace exactly one occurrence of old_string with new_string in a file.',
      parameters: {
        type: 'object',
        properties: { path: { type: 'string' }, old_string: { type: 'string' }, new_string: { type: 'string' } },
        required: ['path', 'old_string', 'new_string'],
      },
    },
  },
];

export class SimulatedWorkspace {
  private readonly files: ProjectFiles;
  private readonly original: ProjectFiles;

  constructor(files: ProjectFiles) {
    this.files = new Map(files);
    this.original = new Map(files);
  }

  run(name: string, argumentsJson: string): ToolOutput {
    let args: Record<string, unknown>;
    try {
      args = JSON.parse(argumentsJson) as Record<string, unknown>;
    } catch {
      return { text: `error: the arguments are not valid JSON: ${argumentsJson.slice(0, 200)}`, isError: true };
    }
    const str = (k: string) => (typeof args[k] === 'string' ? args[k] : '');
    switch (name) {
      case 'read_file': {
        const text = this.files.get(normalise(str('path')));
        return text === undefined ? { text: `ENOENT: no such file or directory, open '${str('path')}'`, isError: true } : { text, isError: false };
      }
      case 'edit_file':
        return this.edit(normalise(str('path')), str('old_string'), str('new_string'));
      case 'run_command':
        return this.command(str('command'));
      default:
        return { text: `unknown tool "${name}"`, isError: true };
    }
  }

  private edit(path: string, old: string, replacement: string): ToolOutput {
    const text = this.files.get(path);
    if (text === undefined) return { text: `ENOENT: no such file or directory, open '${path}'`, isError: true };
    const count = old === '' ? 0 : text.split(old).length - 1;
    if (count !== 1) return { text: `old_string ${count === 0 ? 'was not found' : `matches ${count} times`} in ${path}; nothing was changed.`, isError: true };
    this.files.set(path, text.replace(old, replacement));
    return { text: `Edited ${path}: replaced 1 occurrence (${old.split('\n').length} line(s) → ${replacement.split('\n').length}).`, isError: false };
  }

  private command(command: string): ToolOutput {
    const argv = splitArgs(command);
    const [cmd, ...rest] = argv;
    const paths = [...this.files.keys()].sort();
    switch (cmd) {
      case 'find':
        return { text: paths.map((p) => `./${p}`).join('\n'), isError: false };
      case 'ls': {
        const dir = normalise(rest.filter((a) => !a.startsWith('-'))[0] ?? '.');
        const entries = paths.filter((p) => dir === '' || p.startsWith(`${dir}/`));
        if (entries.length === 0) return { text: `ls: cannot access '${dir}': No such file or directory`, isError: true };
        return {
          text: entries
            .map((p) => `-rw-r--r--  1 dev  staff  ${String(this.files.get(p)!.length).padStart(6)} Nov 20 09:14 ${p.slice(dir === '' ? 0 : dir.length + 1)}`)
            .join('\n'),
          isError: false,
        };
      }
      case 'cat':
      case 'head': {
        const n = cmd === 'head' ? Number(rest[rest.indexOf('-n') + 1] ?? 10) || 10 : Infinity;
        const file = normalise(rest[rest.length - 1] ?? '');
        const text = this.files.get(file);
        if (text === undefined) return { text: `${cmd}: ${file}: No such file or directory`, isError: true };
        return { text: text.split('\n').slice(0, n).join('\n'), isError: false };
      }
      case 'wc': {
        const out = rest
          .filter((a) => !a.startsWith('-'))
          .map((f) => {
            const text = this.files.get(normalise(f));
            return text === undefined ? `wc: ${f}: No such file or directory` : `${String(text.split('\n').length - 1).padStart(6)} ${f}`;
          });
        return { text: out.join('\n'), isError: out.some((l) => l.startsWith('wc:')) };
      }
      case 'grep': {
        const operands = rest.filter((a) => !a.startsWith('-'));
        const [pattern, ...dirs] = operands;
        if (!pattern) return { text: 'usage: grep [-rn] PATTERN [PATH ...]', isError: true };
        const roots = (dirs.length > 0 ? dirs : ['.']).map(normalise);
        const hits: string[] = [];
        for (const p of paths) {
          if (!roots.some((d) => d === '' || p === d || p.startsWith(`${d}/`))) continue;
          this.files
            .get(p)!
            .split('\n')
            .forEach((line, i) => {
              if (line.includes(pattern)) hits.push(`${p}:${i + 1}:${line}`);
            });
        }
        return { text: hits.join('\n'), isError: false };
      }
      case 'npm':
      case 'npx':
        if (rest[0] === 'test' || rest.join(' ') === 'vitest run') return this.testRun();
        if (rest[0] === 'tsc') return this.typecheck();
        return { text: `npm ERR! Missing script: "${rest.join(' ')}"`, isError: true };
      case 'git':
        if (rest[0] === 'status') return { text: this.gitStatus(), isError: false };
        if (rest[0] === 'diff') return { text: this.gitDiff(), isError: false };
        return { text: `git: '${rest[0] ?? ''}' is not supported in this sandbox`, isError: true };
      default:
        return { text: `bash: ${cmd ?? ''}: command not found`, isError: true };
    }
  }

  private fixed(): boolean {
    return (this.files.get(RETRY_FIX.path) ?? '').includes('parseRetryAfter');
  }

  private testRun(): ToolOutput {
    const names = (file: string, n: number) =>
      Array.from(
        { length: n },
        (_, i) =>
          `${file.replace(/^test\/|\.test\.ts$/g, '')} > ${['sends', 'retries', 'caches', 'parses', 'rejects', 'merges', 'times out'][i % 7]} ${['a GET', 'a POST with a body', 'an empty response', 'a 304', 'a redirect', 'a stale entry', 'a large payload', 'a chunked stream'][(i * 3) % 8]} (#${i + 1})`,
      );
    const suites = [
      { file: 'test/client.test.ts', tests: names('test/client.test.ts', 64) },
      { file: 'test/cache.test.ts', tests: names('test/cache.test.ts', 36) },
      { file: 'test/retry.test.ts', tests: names('test/retry.test.ts', 11) },
    ];
    const lines = [' RUN  v4.1.12 /work/fetchkit', ''];
    const failing = this.fixed() ? [] : ['honours Retry-After in seconds', 'honours Retry-After as an HTTP date', 'caps Retry-After at maxDelayMs'];
    for (const s of suites) {
      const failed = s.file === 'test/retry.test.ts' ? failing.length : 0;
      lines.push(
        ` ${failed ? '❯' : '✓'} ${s.file} (${s.tests.length + (s.file === 'test/retry.test.ts' ? 3 : 0)} tests${failed ? ` | ${failed} failed` : ''}) ${40 + s.tests.length * 3}ms`,
      );
      for (const t of s.tests) lines.push(`   ✓ ${t} ${1 + (t.length % 9)}ms`);
      if (s.file === 'test/retry.test.ts') {
        for (const f of ['honours Retry-After in seconds', 'honours Retry-After as an HTTP date', 'caps Retry-After at maxDelayMs']) {
          lines.push(failing.includes(f) ? `   × nextDelay > ${f} 6ms\n     → expected 2250 to be 3000 // Object.is equality` : `   ✓ nextDelay > ${f} 2ms`);
        }
      }
    }
    if (failing.length > 0) {
      lines.push('', '⎯⎯⎯⎯⎯⎯⎯ Failed Tests 3 ⎯⎯⎯⎯⎯⎯⎯', '');
      failing.forEach((f, i) => {
        const expected = [3000, 7000, 8000][i]!;
        const received = [2250, 1250, 4180][i]!;
        lines.push(
          ` FAIL  test/retry.test.ts > nextDelay > ${f}`,
          `AssertionError: expected ${received} to be ${expected} // Object.is equality`,
          '',
          '- Expected',
          '+ Received',
          '',
          `- ${expected}`,
          `+ ${received}`,
          '',
          ` ❯ test/retry.test.ts:${41 + i * 12}:31`,
          `     ${39 + i * 12}|     const response = fakeResponse(429, { 'retry-after': '${[3, 'Thu, 20 Nov 2025 09:00:07 GMT', 60][i]}' });`,
          `     ${40 + i * 12}|     const delay = nextDelay(DEFAULT_POLICY, 1, response);`,
          `     ${41 + i * 12}|     expect(delay).toBe(${expected});`,
          '       |                   ^',
          `     ${42 + i * 12}|   });`,
          '',
          `⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯[${i + 1}/3]⎯`,
          '',
        );
      });
    }
    const total = suites.reduce((n, s) => n + s.tests.length, 0) + 3;
    lines.push(
      '',
      ` Test Files  ${failing.length ? '1 failed | 2 passed' : '3 passed'} (3)`,
      `      Tests  ${failing.length ? `${failing.length} failed | ${total - failing.length} passed` : `${total} passed`} (${total})`,
      '   Start at  09:14:02',
      '   Duration  1.84s (transform 212ms, setup 0ms, collect 480ms, tests 391ms, environment 1ms, prepare 402ms)',
    );
    return { text: lines.join('\n'), isError: failing.length > 0 };
  }

  private typecheck(): ToolOutput {
    if (this.fixed()) {
      const uses = this.files.get(RETRY_FIX.path)!.includes('function parseRetryAfter');
      return uses ? { text: '', isError: false } : { text: "src/net/retry.ts(10,22): error TS2304: Cannot find name 'parseRetryAfter'.", isError: true };
    }
    return { text: "src/net/retry.ts(8,60): error TS6133: 'response' is declared but its value is never read.", isError: true };
  }

  private changed(): string[] {
    return [...this.files.keys()].filter((p) => this.files.get(p) !== this.original.get(p)).sort();
  }

  private gitStatus(): string {
    const changed = this.changed();
    return [
      'On branch fix/retry-after',
      changed.length ? 'Changes not staged for commit:' : 'nothing to commit, working tree clean',
      ...changed.map((p) => `\tmodified:   ${p}`),
    ].join('\n');
  }

  private gitDiff(): string {
    const out: string[] = [];
    for (const p of this.changed()) {
      const a = this.original.get(p)!.split('\n');
      const b = this.files.get(p)!.split('\n');
      let start = 0;
      while (start < a.length && a[start] === b[start]) start++;
      let endA = a.length - 1;
      let endB = b.length - 1;
      while (endA >= start && endB >= start && a[endA] === b[endB]) {
        endA--;
        endB--;
      }
      const ctx = Math.max(0, start - 3);
      out.push(`diff --git a/${p} b/${p}`, `--- a/${p}`, `+++ b/${p}`, `@@ -${ctx + 1},${endA - ctx + 4} +${ctx + 1},${endB - ctx + 4} @@`);
      for (let i = ctx; i < start; i++) out.push(` ${a[i]}`);
      for (let i = start; i <= endA; i++) out.push(`-${a[i]}`);
      for (let i = start; i <= endB; i++) out.push(`+${b[i]}`);
      for (let i = endA + 1; i < Math.min(a.length, endA + 4); i++) out.push(` ${a[i]}`);
    }
    return out.join('\n');
  }
}

function normalise(path: string): string {
  return path.replace(/^\.\/?/, '').replace(/\/+$/, '');
}

/** Splits a command line on spaces, honouring single and double quotes (no other shell syntax). */
export function splitArgs(command: string): string[] {
  const out: string[] = [];
  let current = '';
  let quote: string | undefined;
  let has = false;
  for (const ch of command) {
    if (quote) {
      if (ch === quote) quote = undefined;
      else current += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      has = true;
    } else if (/\s/.test(ch)) {
      if (has || current) out.push(current);
      current = '';
      has = false;
    } else {
      current += ch;
    }
  }
  if (has || current) out.push(current);
  return out;
}
