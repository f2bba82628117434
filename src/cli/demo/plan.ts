/**
 * The scripted coding agent's plan: for each turn, the steps a plausible agent would take on
 * the made-up project (overview, reads — sometimes several in parallel —, searches, test runs,
 * edits, a final answer). The local server replays it one step per chat request, so the
 * conversation grows the way a real agent's does, with tool outputs of realistic sizes.
 */
import type { ProjectFiles } from './project';
import { createRandom } from './random';

/** `demo`: read_file, run_command (simulated shell), edit_file. `sandbox`: read_file and run_command with read-only commands only. */
export type Toolset = 'demo' | 'sandbox';

export interface PlannedCall {
  name: 'read_file' | 'run_command' | 'edit_file';
  args: Record<string, string>;
}

export interface PlannedAction {
  turn: number;
  /** Assistant text sent with the calls (or the final answer). */
  text?: string;
  calls: PlannedCall[];
  /** The turn's last step: an answer without tool calls. */
  final: boolean;
}

/** The user prompts the plan answers, one per turn. */
export const TASK_PROMPTS = [
  'The HTTP client retries 429 responses too early: `nextDelay` in src/net/retry.ts ignores the Retry-After header. ' +
    'Find where retries are decided, make nextDelay honour Retry-After (seconds or an HTTP date, capped at maxDelayMs), and make the test suite pass.',
  'Now add a CHANGELOG entry for the Retry-After fix and document the retry options in README.md.',
  'Double-check the transport for other places that compute a backoff without the policy.',
];

export const RETRY_FIX = {
  path: 'src/net/retry.ts',
  old: '  return backoff + Math.floor(Math.random() * 100);',
  new:
    "  const retryAfter = parseRetryAfter(response?.headers.get('retry-after'), clock.now());\n" +
    '  if (retryAfter !== undefined) return Math.min(retryAfter, policy.maxDelayMs);\n' +
    '  return backoff + Math.floor(Math.random() * 100);',
} as const;

const READ_REASONS = [
  'to see how requests are sent',
  'to find where the retry decision is made',
  'to check how errors carry the attempt number',
  'to see what the tests expect',
  'for the call sites of nextDelay',
  'to understand the cache invalidation',
];

/**
 * The plan for `turns[i]` steps per turn (each at least 1; the last step of a turn is the answer).
 * Deterministic for a seed.
 */
export function planTask(options: { files: ProjectFiles; turns: readonly number[]; seed: number; toolset: Toolset }): PlannedAction[] {
  const { toolset } = options;
  const r = createRandom(options.seed * 104729 + 3);
  const files = new Map(options.files); // the agent's own view, kept in step with its edits
  const paths = [...files.keys()];
  const srcPaths = paths.filter((p) => p.startsWith('src/') || p.startsWith('test/'));
  const plan: PlannedAction[] = [];
  let readCursor = 0;
  const readOrder = [
    'src/net/retry.ts',
    'src/net/client.ts',
    'test/retry.test.ts',
    'src/net/errors.ts',
    'src/net/transport.ts',
    ...paths.filter((p) => !['src/net/retry.ts', 'src/net/client.ts', 'test/retry.test.ts', 'src/net/errors.ts', 'src/net/transport.ts'].includes(p)),
  ];
  const nextRead = () => readOrder[readCursor++ % readOrder.length]!;
  const read = (path: string): PlannedCall => ({ name: 'read_file', args: { path } });
  const run = (command: string): PlannedCall => ({ name: 'run_command', args: { command } });

  const bigCommand = (): PlannedCall =>
    toolset === 'demo'
      ? run(r.pick(['npm test', 'cat logs/retry-failures.log', 'git diff', 'grep -rn status src']))
      : run(r.pick(['cat logs/retry-failures.log', 'grep -rn status src', 'cat src/generated/schema.ts']));
  const smallCommand = (): PlannedCall =>
    run(
      r.pick([
        'grep -rn "Retry-After" src test',
        'grep -rn nextDelay src test',
        'grep -rn TransportError src',
        `wc -l ${r.pick(srcPaths)}`,
        `head -n 40 ${r.pick(srcPaths)}`,
        'ls -la src/net',
        ...(toolset === 'demo' ? ['npx tsc --noEmit', 'git status'] : []),
      ]),
    );
  const edit = (path: string): PlannedCall | undefined => {
    const text = files.get(path);
    if (text === undefined) return undefined;
    const lines = text.split('\n').filter((l) => l.trim().length > 24 && text.split(l).length === 2);
    if (lines.length === 0) return undefined;
    const old = r.pick(lines);
    const replacement = `${old}\n${old.match(/^\s*/)?.[0] ?? ''}// reviewed: keeps the policy's maxDelayMs cap`;
    files.set(path, text.replace(old, replacement));
    return { name: 'edit_file', args: { path, old_string: old, new_string: replacement } };
  };
  const applyFix = (): PlannedCall => {
    const text = files.get(RETRY_FIX.path) ?? '';
    files.set(RETRY_FIX.path, text.replace(RETRY_FIX.old, RETRY_FIX.new));
    return { name: 'edit_file', args: { path: RETRY_FIX.path, old_string: RETRY_FIX.old, new_string: RETRY_FIX.new } };
  };

  const say = (calls: PlannedCall[]): string | undefined => {
    if (!r.chance(0.45)) return undefined;
    const c = calls[0]!;
    if (c.name === 'read_file') return `Reading ${c.args.path} ${r.pick(READ_REASONS)}.`;
    if (c.name === 'edit_file') return `Editing ${c.args.path}.`;
    return `Running \`${c.args.command}\`.`;
  };

  options.turns.forEach((steps, turn) => {
    const n = Math.max(1, Math.floor(steps));
    const fixAt = toolset === 'demo' && turn === 0 ? Math.max(1, Math.floor(n * 0.6)) : -1;
    for (let i = 0; i < n - 1; i++) {
      let calls: PlannedCall[];
      if (turn === 0 && i === 0) calls = [run('find . -type f')];
      else if (turn === 0 && i === 1) calls = [read('package.json'), read('README.md')];
      else if (i === fixAt) calls = [applyFix()];
      else if (i === fixAt + 1 && fixAt > 0) calls = [run('npm test')];
      else if (turn === 1 && toolset === 'demo' && i < 4) {
        const docs = ['CHANGELOG.md', 'README.md'][i >> 1]!;
        calls = [i % 2 === 0 ? read(docs) : (edit(docs) ?? read(docs))];
      } else {
        const roll = r.next();
        if (roll < 0.42) calls = [read(nextRead())];
        else if (roll < 0.57) calls = Array.from({ length: r.int(2, 3) }, () => read(nextRead()));
        else if (roll < 0.72) calls = [smallCommand()];
        else if (roll < 0.84) calls = [bigCommand()];
        else if (roll < 0.92 && toolset === 'demo') calls = [edit(r.pick(srcPaths)) ?? read(nextRead())];
        else calls = [read(nextRead()), smallCommand()];
      }
      const action: PlannedAction = { turn, calls, final: false };
      const text = say(calls);
      if (text) action.text = text;
      plan.push(action);
    }
    plan.push({ turn, calls: [], final: true, text: finalAnswer(turn, toolset) });
  });
  return plan;
}

function finalAnswer(turn: number, toolset: Toolset): string {
  if (turn === 0) {
    return toolset === 'demo'
      ? 'Done. `nextDelay` in src/net/retry.ts now honours Retry-After (delta-seconds or an HTTP date, capped at `policy.maxDelayMs`) and falls back to the exponential backoff otherwise. `npm test` passes (all suites green); the log in logs/retry-failures.log shows the early retries the fix removes.'
      : 'I found the retry decision in src/net/retry.ts (`nextDelay`) and its callers in src/net/client.ts and src/net/transport.ts; the log confirms 429s retried before their Retry-After. The fix is to read the header in nextDelay and cap it at maxDelayMs.';
  }
  if (turn === 1) {
    return toolset === 'demo'
      ? 'Added a CHANGELOG entry ("Retry-After is honoured for 429 and 503 responses") and a "Retry options" section to README.md describing maxAttempts, baseDelayMs and maxDelayMs.'
      : 'The retry options are maxAttempts, baseDelayMs and maxDelayMs (DEFAULT_POLICY in src/net/retry.ts); the README does not document them yet.';
  }
  return 'No other backoff computation bypasses the policy: transport.ts delegates to nextDelay everywhere.';
}
