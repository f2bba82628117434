/**
 * The `xcompact` command as a user runs it: its exit code, stdout, stderr and the files it
 * writes or must leave alone. Most cases call the command's entry in this process
 * (test/helpers/cli.ts); a few run it as a process of its own (node --import tsx
 * src/cli/main.ts, the entry tsup builds into dist/cli/main.js) for what only a process shows:
 * its exit status and what reaches its stdout and stderr.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSummaryRequest } from '../../src/cli/demo/scripted-coder';
import { Session } from '../../src/session/session';
import { JsonlStore, parseLogBytes } from '../../src/session/stores/jsonl';
import { startOpenAIServer, type ChatRequestBody } from '../../src/testing/openai-server';
import { ROOT, spawnTsx, spawnXcompact, xcompact, type Ran } from '../helpers/cli';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { findPiData } from '../helpers/pi-data';

const EXAMPLE = join(ROOT, 'examples', 'agent-loop.ts');
/** A spawned process compiles TypeScript on start; leave room on a loaded machine. */

/** examples/agent-loop.ts run from the command line, as its header shows, with `stdin` typed at its prompt. */
function agentLoopExample(env: Record<string, string | undefined>, stdin: string): Promise<Ran> {
  return spawnTsx(EXAMPLE, [], { env: { OPENAI_API_KEY: 'test', ...env }, stdin });
}

/** A user-facing failure: non-zero exit, exactly one line on stderr, no stack trace. */
function expectOneLineError(r: Ran, pattern: RegExp): void {
  expect(r.code, r.stderr).not.toBe(0);
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^xcompact: /);
  expect(lines[0]).toMatch(pattern);
  expect(r.stderr).not.toMatch(/^\s+at /m);
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

const dir = mkdtempSync(join(tmpdir(), 'xcompact-cli-'));
const demoDir = join(dir, 'demo');
const sessionFile = join(demoDir, 'demo.jsonl');
const { path: piPath } = findPiData();

/** A chat-messages file whose head is big enough to be worth a checkpoint. */
function writeMessagesFile(path: string): void {
  const messages: unknown[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the failing build in src/app.ts' },
  ];
  for (let i = 0; i < 6; i++) {
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: `c${i}`, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command: `cat src/mod${i}.ts` }) } }],
    });
    messages.push({
      role: 'tool',
      tool_call_id: `c${i}`,
      content: Array.from({ length: 40 }, (_, j) => `export function f${i}_${j}(x: number): number { return x * ${j}; }`).join('\n'),
    });
  }
  messages.push({ role: 'assistant', content: 'src/app.ts fails on a type error at line 3.' }, { role: 'user', content: 'Go ahead and fix it.' });
  writeFileSync(
    path,
    `${JSON.stringify({ model: 'openai/gpt-4o-mini', tools: [{ type: 'function', function: { name: 'bash', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }], messages }, null, 2)}\n`,
  );
}

let demo: Ran;
beforeAll(async () => {
  demo = await xcompact(['demo', '--steps', '40', '--quiet', '--out', demoDir]);
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('xcompact --help and --version', () => {
  it.concurrent.each([
    [[], ['demo', 'inspect', 'compact', '--version']],
    [['demo'], ['--steps', '--window', '--out', '--seed', '--quiet', '--no-color', '--verbose']],
    [['inspect'], ['<session.jsonl>', '--model', '--context-window', '--config', '--json']],
    [['compact'], ['--summarizer', '--base-url', '--model', '--api-key-env', '--context-window', '--output', '--in-place', '--focus']],
  ])('%j --help lists its options', async (cmd, expected) => {
    const r = await xcompact([...cmd, '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Usage: xcompact${cmd.length ? ` ${cmd[0]}` : ''}`);
    for (const e of expected) expect(r.stdout).toContain(e);
  });

  it('--version prints the package version (a process of its own: its stdout and exit status)', async () => {
    const r = await spawnXcompact(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
  });
});

describe('xcompact demo', () => {
  it('runs 40 steps, compacts, and writes a session that reopens and a trace', async () => {
    expect(demo.code, demo.stderr).toBe(0);
    expect(demo.stderr).toBe('');
    expect(demo.stdout).toMatch(/steps\s+40 in 2 turns/);
    expect(demo.stdout).toMatch(/overflow recovery\s+1 rejected request recovered/);
    const compactions = Number(/compactions\s+(\d+)/.exec(demo.stdout)?.[1]);
    expect(compactions).toBeGreaterThanOrEqual(2);

    const session = await Session.open(new JsonlStore(demoDir), 'demo');
    try {
      const summaries = session.events().filter((e) => e.type === 'compaction/summary');
      expect(summaries).toHaveLength(compactions);
      expect(session.events().filter((e) => e.type === 'step/start')).toHaveLength(40);
      expect(session.needsRecovery).toBe(false);
      expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
    } finally {
      await session.close();
    }
    const trace = JSON.parse(readFileSync(join(demoDir, 'trace.json'), 'utf8')) as { format: string; steps: Array<{ kind: string; machine?: string }> };
    expect(trace.format).toBe('xcompact-trace');
    expect(trace.steps.some((s) => s.kind === 'state' && s.machine === 'transaction')).toBe(true);
    expect(trace.steps.some((s) => s.kind === 'session')).toBe(true);
    expect(readFileSync(join(demoDir, 'trace.js'), 'utf8')).toMatch(/^window\.XCOMPACT_TRACE = \{/);
    // The live trace (for the viewer's follow mode) holds at least every step of the saved one, in order.
    const live: Array<{ step?: unknown }> = [];
    new Function('xcompactTrace', readFileSync(join(demoDir, 'trace.live.js'), 'utf8'))((r: { step?: unknown }) => live.push(r));
    const liveSteps = live.filter((r) => r.step !== undefined).map((r) => r.step);
    expect(liveSteps.slice(0, trace.steps.length)).toEqual(trace.steps);
  });

  it('rejects a bad --steps with one line and exit code 2 (a process of its own: its exit status)', async () => {
    const r = await spawnXcompact(['demo', '--steps', '2001', '--out', join(dir, 'unused')]);
    expectOneLineError(r, /--steps 2001 is out of range/);
    expect(r.code).toBe(2);
  });

  it('runs 5 steps: a short task, with the overflow scene reported as not staged', async () => {
    const out = join(dir, 'demo-5');
    const r = await xcompact(['demo', '--steps', '5', '--quiet', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/steps\s+5 in 2 turns/);
    expect(r.stdout).toMatch(/overflow recovery\s+not staged/);
    const session = await Session.open(new JsonlStore(out), 'demo');
    try {
      expect(session.events().filter((e) => e.type === 'step/start')).toHaveLength(5);
      expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
    } finally {
      await session.close();
    }
  });
});

describe('xcompact inspect', () => {
  it.concurrent('reports the demo session without touching it', async () => {
    const before = readFileSync(sessionFile);
    const listing = readdirSync(demoDir).sort();
    const r = await xcompact(['inspect', sessionFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('xcompact session');
    expect(r.stdout).toMatch(/window\s+16,384 tokens/);
    expect(r.stdout).toMatch(/threshold\s+13,107/);
    expect(r.stdout).toMatch(/checkpoints: \d+ on the surface, \d+ written/);
    expect(r.stdout).toMatch(/locks\n\s+none held/);
    expect(r.stdout).toMatch(/torn tail\n\s+none/);
    expect(readFileSync(sessionFile).equals(before)).toBe(true);
    expect(readdirSync(demoDir).sort()).toEqual(listing); // no lock file, nothing kept aside

    const json = await xcompact(['inspect', sessionFile, '--json']);
    const report = JSON.parse(json.stdout) as { events: number; checkpoints: unknown[]; pressure: { window: number; threshold: number; totalTokens: number } };
    const lines = before.toString('utf8').trim().split('\n');
    expect(report.events).toBe(lines.length);
    expect(report.checkpoints).toHaveLength(lines.filter((l) => l.includes('"type":"compaction/summary"')).length);
    expect(report.pressure.window).toBe(16384);
    expect(report.pressure.totalTokens).toBeLessThan(report.pressure.threshold);
  });

  it.concurrent('reports a torn tail and an orphan lock with the advice to recover', async () => {
    const lines = readFileSync(sessionFile, 'utf8').trim().split('\n');
    // Cut the log right after a compaction/start (the process died mid-summary), then a torn half-line.
    const start = lines.findIndex((l) => l.includes('"type":"compaction/start"'));
    const crashed = join(dir, 'crashed.jsonl');
    writeFileSync(crashed, `${lines.slice(0, start + 1).join('\n')}\n{"seq":${start + 1},"type":"compac`);
    const r = await xcompact(['inspect', crashed, '--context-window', '16384']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`line ${start + 2}: \\d+ bytes without a final newline`));
    expect(r.stdout).toMatch(/orphan compaction\/start at seq \d+/);
    expect(r.stdout).toContain('session.recover()');
  });

  it.concurrent("imports a pi transcript in memory and knows its model's window, or takes --context-window's", async () => {
    const r = await xcompact(['inspect', piPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('pi transcript, imported in memory');
    expect(r.stdout).toMatch(/88 turns, 453 steps/);
    expect(r.stdout).toMatch(/18 calls without a recorded result/);
    // claude-sonnet-4-5 is built in (200K): no "window unknown".
    expect(r.stdout).toMatch(/window\s+200,000 tokens \(\d+% used\) · from the model entry \(config or built-in\)/);
    expect(r.stdout).not.toMatch(/window unknown/);
    const withWindow = await xcompact(['inspect', piPath, '--context-window', '150000']);
    expect(withWindow.stdout).toMatch(/window\s+150,000 tokens \(\d+% used\) · from --context-window/);
    expect(withWindow.stdout).toMatch(/at or above/);
  });
});

describe('xcompact compact', () => {
  it.concurrent('compacts a chat-messages JSON file with the extractive summarizer, leaving the input untouched', async () => {
    const input = join(dir, 'messages.json');
    writeMessagesFile(input);
    const before = readFileSync(input);
    const r = await xcompact(['compact', input, '--summarizer', 'extractive']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/compacted 14 messages into 1 checkpoint/);
    expect(readFileSync(input).equals(before)).toBe(true);
    const out = JSON.parse(readFileSync(join(dir, 'messages.compacted.json'), 'utf8')) as {
      model: string;
      tools: unknown[];
      messages: Array<{ role: string; content: string }>;
    };
    expect(out.model).toBe('openai/gpt-4o-mini');
    expect(out.tools).toHaveLength(1);
    expect(out.messages.map((m) => m.role)).toEqual(['system', 'user', 'user']);
    expect(out.messages[1]!.content).toContain('<compacted-summary>');
    expect(out.messages[2]!.content).toBe('Go ahead and fix it.');
    expect(openAIMessageProblems(out.messages)).toEqual([]);
    // A second run refuses to overwrite the output.
    const again = await xcompact(['compact', input, '--summarizer', 'extractive']);
    expectOneLineError(again, /already exists: pass --force/);
  });

  it.concurrent('compacts a stored session into a new session file, leaving the input untouched', async () => {
    const input = join(dir, 'stored.jsonl');
    copyFileSync(sessionFile, input);
    const before = readFileSync(input);
    const r = await xcompact(['compact', input, '--summarizer', 'extractive', '--focus', 'the retry logic']);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(input).equals(before)).toBe(true);
    const output = join(dir, 'stored.compacted.jsonl');
    expect(r.stdout).toContain(`wrote ${output}`);
    const session = await Session.open(new JsonlStore(dir), 'stored.compacted');
    try {
      const log = session.events();
      expect(log.length).toBeGreaterThan(before.toString('utf8').trim().split('\n').length);
      const last = log.filter((e) => e.type === 'compaction/start').at(-1)!;
      expect(last.type === 'compaction/start' && last.data).toEqual({ turn: null, trigger: 'manual' });
      expect(session.deriveMessages().length).toBeLessThanOrEqual(3);
      expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
    } finally {
      await session.close();
    }
  });

  it.concurrent('uses a real OpenAI-compatible endpoint through the SDK', async () => {
    const server = await startOpenAIServer({
      scenarios: () => ({ kind: 'reply', content: '## Primary Request and Intent\n- Fix the build in src/app.ts\n\n## Next Step\n- Fix line 3.' }),
    });
    try {
      const input = join(dir, 'endpoint.json');
      writeMessagesFile(input);
      const r = await xcompact(
        ['compact', input, '--base-url', server.baseURL, '--model', 'local/summarizer-1', '--context-window', '32768', '--max-tokens', '2048'],
        { OPENAI_API_KEY: undefined },
      );
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/with the openai summarizer \(local\/summarizer-1\)/);
      const summaryRequests = server.requests.filter((q) => isSummaryRequest(q.json as ChatRequestBody));
      expect(summaryRequests).toHaveLength(1);
      const body = summaryRequests[0]!.json as ChatRequestBody;
      expect(body.model).toBe('summarizer-1');
      // --max-tokens caps the checkpoint; the ledger (the user's messages, files, errors) takes its share off the model's part.
      expect(body.max_tokens).toBeLessThanOrEqual(2048);
      expect(body.max_tokens).toBeGreaterThan(1024);
      const out = JSON.parse(readFileSync(join(dir, 'endpoint.compacted.json'), 'utf8')) as { messages: Array<{ content: string }> };
      expect(out.messages[1]!.content).toContain('Fix line 3.');
    } finally {
      await server.close();
    }
  });
});

/** A fresh directory holding a copy of `lines` (the demo log's first lines) as `name`; no torn tail. */
function sessionCopy(sub: string, name: string, lines?: (all: string[]) => string[]): { dir: string; file: string } {
  const at = join(dir, sub);
  mkdirSync(at, { recursive: true });
  const all = readFileSync(sessionFile, 'utf8').trim().split('\n');
  const file = join(at, name);
  writeFileSync(file, `${(lines ? lines(all) : all).join('\n')}\n`);
  return { dir: at, file };
}

/** The demo log cut right after a compaction/start: a crashed agent's log (open turn and step, orphan lock). */
const crashedMidSummary = (all: string[]) => all.slice(0, all.findIndex((l) => l.includes('"type":"compaction/start"')) + 1);

describe('xcompact compact --in-place', () => {
  it.concurrent('appends the compaction to a <id>.jsonl session, keeping every byte it had', async () => {
    const { dir: at, file } = sessionCopy('inplace-ok', 'live.jsonl');
    const before = readFileSync(file);
    const r = await xcompact(['compact', file, '--in-place', '--summarizer', 'extractive']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`wrote ${file} (appended in place)`);
    const after = readFileSync(file);
    expect(after.length).toBeGreaterThan(before.length);
    expect(after.subarray(0, before.length).equals(before)).toBe(true);
    // No lock left behind, no other file but the meter's snapshot a clean close saves (docs/sessions-and-stores.md#reopening-a-long-session).
    expect(readdirSync(at).sort()).toEqual(['live.jsonl', 'live.jsonl.prices']);
  });

  it.concurrent('refuses a chat-messages .json file (it would be replaced, not appended to), leaving it byte-identical', async () => {
    const at = join(dir, 'inplace-json');
    mkdirSync(at, { recursive: true });
    const input = join(at, 'chat.json');
    writeMessagesFile(input);
    const before = readFileSync(input);
    const r = await xcompact(['compact', input, '--in-place', '--summarizer', 'extractive']);
    expectOneLineError(
      r,
      /chat\.json is a chat-messages JSON file \(its messages would be overwritten\): --in-place only appends to an xcompact session log \(JSONL\); drop --in-place/,
    );
    expect(r.code).toBe(2);
    expect(r.stdout).not.toContain('appended in place');
    expect(readFileSync(input).equals(before)).toBe(true);
    expect(readdirSync(at)).toEqual(['chat.json']);
  });

  it.concurrent('checks --recover runs for usage errors before recovering: a failing run leaves the log byte-identical', async () => {
    const { dir: at, file } = sessionCopy('inplace-recover', 'crashed.jsonl', crashedMidSummary);
    const before = readFileSync(file);
    // An unknown summarization model: no window to fit the summary request into.
    const unknown = await xcompact(['compact', file, '--in-place', '--recover', '--model', 'acme/mystery-9', '--base-url', 'http://127.0.0.1:1/v1']);
    expectOneLineError(unknown, /unknown model acme\/mystery-9: its context window is not known.*pass --context-window/);
    expect(unknown.code).toBe(2);
    expect(readFileSync(file).equals(before)).toBe(true);

    // A log with no request header yet names no model to summarize with.
    const { file: early } = sessionCopy('inplace-recover', 'early.jsonl', (all) =>
      all.slice(
        0,
        all.findIndex((l) => l.includes('"type":"request/header"')),
      ),
    );
    const earlyBefore = readFileSync(early);
    const noModel = await xcompact(['compact', early, '--in-place', '--recover', '--base-url', 'http://127.0.0.1:1/v1']);
    expectOneLineError(noModel, /early\.jsonl names no model.*pass --model provider\/model/);
    expect(noModel.code).toBe(2);
    expect(readFileSync(early).equals(earlyBefore)).toBe(true);
    expect(readdirSync(at).sort()).toEqual(['crashed.jsonl', 'early.jsonl']);

    // With the usage right, the same run recovers and compacts, appending only.
    const ok = await xcompact(['compact', file, '--in-place', '--recover', '--summarizer', 'extractive']);
    expect(ok.code, ok.stderr).toBe(0);
    const after = readFileSync(file);
    expect(after.subarray(0, before.length).equals(before)).toBe(true);
    const appended = after.subarray(before.length).toString('utf8');
    expect(appended).toContain('"type":"session/end-seed"');
    expect(appended).toContain('"type":"compaction/summary"');
  });

  it.concurrent.each([
    ['sess.log', 'sess.log.jsonl'],
    ['Up.JSONL', 'Up.jsonl'],
  ])('refuses %s, whose store file would be %s (another, empty session), and creates nothing next to it', async (name, wrong) => {
    const { dir: at, file } = sessionCopy(`inplace-name-${name}`, name);
    const before = readFileSync(file);
    const r = await xcompact(['compact', file, '--in-place', '--summarizer', 'extractive']);
    expectOneLineError(
      r,
      new RegExp(`--in-place needs the session file named exactly <id>\\.jsonl.*"${name.replace('.', '\\.')}" is not: rename it .* or drop --in-place`),
    );
    expect(r.code).toBe(2);
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(existsSync(join(at, wrong))).toBe(false);
    expect(readdirSync(at)).toEqual([name]);
  });
});

describe('errors: one line on stderr, non-zero exit, a stack only with --verbose', () => {
  it.concurrent('a missing file (inspect: a process of its own, its stderr and exit status)', async () => {
    const spawned = await spawnXcompact(['inspect', join(dir, 'missing.jsonl')]);
    expectOneLineError(spawned, /cannot read .*missing\.jsonl: no such file; check the path/);
    expect(spawned.code).toBe(1);
    expectOneLineError(await xcompact(['compact', join(dir, 'missing.json'), '--summarizer', 'extractive']), /cannot read .*missing\.json: no such file/);
  });

  it.concurrent('bad JSON, with its line number', async () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"messages": [\n  {"role": "user", "content": "hi"},\n  {"role": "assistant" "content": "x"}\n]}\n');
    expectOneLineError(await xcompact(['compact', bad, '--summarizer', 'extractive']), /bad\.json:3:\d+: not valid JSON/);
    const badl = join(dir, 'bad.jsonl');
    const lines = readFileSync(sessionFile, 'utf8').split('\n');
    writeFileSync(badl, `${lines.slice(0, 3).join('\n')}\n{"seq":3,"type":\n${lines.slice(3, 6).join('\n')}\n`);
    const before = readFileSync(badl);
    expectOneLineError(await xcompact(['inspect', badl]), /bad\.jsonl:4: not valid JSON/);
    expectOneLineError(await xcompact(['compact', badl, '--summarizer', 'extractive']), /bad\.jsonl:4: not valid JSON/);
    expect(readFileSync(badl).equals(before)).toBe(true);
    expect(existsSync(join(dir, 'bad.compacted.jsonl'))).toBe(false);
  });

  it.concurrent("a bad session line is reported in the store's own words (parseLogBytes), with the fix", async () => {
    const at = join(dir, 'bad-line');
    mkdirSync(at, { recursive: true });
    const file = join(at, 'broken.jsonl');
    const lines = readFileSync(sessionFile, 'utf8').split('\n');
    writeFileSync(file, `${lines.slice(0, 5).join('\n')}\n{"seq":5,"type":"user/mess\n${lines.slice(5, 8).join('\n')}\n`);
    const before = readFileSync(file);
    let storeMessage = '';
    try {
      parseLogBytes(before, file);
    } catch (err) {
      storeMessage = (err as Error).message;
    }
    expect(storeMessage).toMatch(/broken\.jsonl:6: not valid JSON/);
    for (const args of [
      ['inspect', file],
      ['compact', file, '--summarizer', 'extractive'],
    ]) {
      const r = await xcompact(args);
      expectOneLineError(r, /broken\.jsonl:6: not valid JSON/);
      expect(r.stderr).toBe(`xcompact: ${storeMessage} Fix or remove that line.\n`);
    }
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(readdirSync(at)).toEqual(['broken.jsonl']);
  });

  it.concurrent('an unknown model', async () => {
    const input = join(dir, 'unknown-model.json');
    writeMessagesFile(input);
    const r = await xcompact(['compact', input, '--model', 'acme/mystery-9', '--base-url', 'http://127.0.0.1:1/v1']);
    expectOneLineError(r, /unknown model acme\/mystery-9: its context window is not known.*pass --context-window <tokens>/);
  });

  it.concurrent('an unreachable endpoint', async () => {
    const input = join(dir, 'unreachable.json');
    writeMessagesFile(input);
    const port = await closedPort();
    const args = ['compact', input, '--model', 'openai/gpt-4o-mini', '--base-url', `http://127.0.0.1:${port}/v1`];
    const r = await xcompact(args);
    expectOneLineError(r, new RegExp(`cannot reach http://127\\.0\\.0\\.1:${port}/v1: connection refused — is the server running\\?`));
    expect(existsSync(join(dir, 'unreachable.compacted.json'))).toBe(false);
    const verbose = await xcompact([...args, '--verbose']);
    expect(verbose.code).not.toBe(0);
    expect(verbose.stderr).toMatch(/^\s+at /m);
  });

  it.concurrent('a missing API key', async () => {
    const input = join(dir, 'nokey.json');
    writeMessagesFile(input);
    const r = await xcompact(['compact', input, '--model', 'openai/gpt-4o-mini', '--base-url', 'https://api.openai.com/v1'], { OPENAI_API_KEY: undefined });
    expectOneLineError(r, /the environment variable OPENAI_API_KEY is not set/);
  });
});

describe('examples/agent-loop.ts from the command line', () => {
  it('stops at the first step when the model has no known window (it would never be compacted), naming the models entry', async () => {
    const server = await startOpenAIServer({ scenarios: () => ({ kind: 'reply', content: 'All done here.' }) });
    const at = join(dir, 'agent-loop-example');
    mkdirSync(join(at, 'sandbox'), { recursive: true });
    try {
      const r = await agentLoopExample(
        {
          OPENAI_BASE_URL: server.baseURL,
          MODEL: 'mystery-7b',
          PROVIDER: undefined,
          CONTEXT_WINDOW: undefined,
          SANDBOX: join(at, 'sandbox'),
          SESSION_DIR: join(at, 'sessions'),
          SESSION: 'example',
        },
        'first request\nsecond request\nthird request\n/exit\n',
      );
      expect(r.code).not.toBe(0);
      // No silent no-op: the first step is refused, and the message says what to add (or how to opt out).
      const said = `${r.stdout}\n${r.stderr}`;
      expect(said).toContain('models: { "local/mystery-7b": { contextWindow: <tokens> } }');
      expect(said).toContain('requireCapacity: false');
    } finally {
      await server.close();
    }
  });
});
