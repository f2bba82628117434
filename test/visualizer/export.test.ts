import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { fromPromise, setup, type AnyStateMachine } from 'xstate';
import { Session } from '../../src/session/index';
import { createTraceRecorder, describeGuard, type LiveTraceRecord, type Trace, type TraceSessionStep, type TraceStateStep } from '../../src/trace';
import { generateAll, outDir } from '../../visualizer/export';
import { charts, stateNodeIds } from '../../visualizer/machines';
import { mermaidId, toMermaid } from '../../visualizer/mermaid';
import { recordSampleCompaction } from '../../visualizer/sample';

/** `source -> target on event [guard]` for every transition of a machine, always included. */
function transitionsOf(machine: AnyStateMachine): string[] {
  type N = { id: string; states: Record<string, N>; transitions: Map<string, T[]>; always?: T[] };
  type T = { eventType: string; target?: { id: string }[]; guard?: unknown };
  const out: string[] = [];
  const walk = (node: N) => {
    for (const t of [...node.transitions.values()].flat().concat(node.always ?? [])) {
      const targets = (t.target ?? []).map((x) => x.id).join(',');
      out.push(`${node.id} -> ${targets} on ${t.eventType} [${describeGuard(t.guard) ?? ''}]`);
    }
    for (const child of Object.values(node.states)) walk(child);
  };
  walk(machine.root as unknown as N);
  return out.sort();
}

describe('npm run visualize outputs', () => {
  it('visualizer/out/ matches the machines (fails when a committed file is stale)', async () => {
    const files = await generateAll();
    const onDisk = existsSync(outDir) ? readdirSync(outDir).filter((name) => !name.endsWith('.png')) : []; // screenshots: the browser test's
    const stale = [...files]
      .filter(([name, content]) => !existsSync(join(outDir, name)) || readFileSync(join(outDir, name), 'utf8') !== content)
      .map(([name]) => name);
    const extra = onDisk.filter((name) => !files.has(name));
    const problems = [...stale.map((n) => `visualizer/out/${n} is stale or missing`), ...extra.map((n) => `visualizer/out/${n} is no longer generated`)];
    expect(problems, `The exported charts are out of date. Run \`npm run visualize\` and commit visualizer/out/.\n${problems.join('\n')}`).toEqual([]);
  });

  it('every state of every machine appears in its .mmd and its .stately.ts, in document order', () => {
    for (const { name, machine } of charts) {
      const mmd = readFileSync(join(outDir, `${name}.mmd`), 'utf8');
      const stately = readFileSync(join(outDir, `${name}.stately.ts`), 'utf8');
      const ids = stateNodeIds(machine);
      expect(ids.length).toBeGreaterThan(3);
      let at = -1;
      for (const id of ids) {
        const key = id.split('.').pop()!;
        expect(mmd, `${name}.mmd declares ${id}`).toContain(`state "${key}" as ${mermaidId(id)}`);
        if (id === machine.id) continue;
        // Each state's key, after the one before it in document order (keys are plain identifiers here).
        const next = stately.indexOf(`${key}: {`, at + 1);
        expect(next, `${name}.stately.ts: ${id} after the state before it`).toBeGreaterThan(at);
        at = next;
      }
    }
  });

  it('every transition of every machine is an edge of its diagram', () => {
    for (const { name, machine } of charts) {
      const edges = new Set(
        toMermaid(machine)
          .edges.filter((e) => e.source !== null && e.target !== null)
          .map((e) => `${e.source} -> ${e.target} on ${e.event} [${e.guard ?? ''}]`),
      );
      for (const t of transitionsOf(machine)) {
        // A targetless transition is drawn as a loop on its source.
        const drawn = t.replace(/^(\S+) ->  on/, '$1 -> $1 on');
        expect(edges.has(drawn), `${name}: ${t}`).toBe(true);
      }
    }
  });

  it('the Stately source builds the same chart (states and transitions) with createMachine', async () => {
    for (const { name, machine } of charts) {
      const mod = (await import(pathToFileURL(join(outDir, `${name}.stately.ts`)).href)) as { machine: AnyStateMachine };
      expect(stateNodeIds(mod.machine), name).toEqual(stateNodeIds(machine));
      expect(transitionsOf(mod.machine), name).toEqual(transitionsOf(machine));
    }
  });

  it('two runs export the same files, with no run-dependent data, and nothing that no tool opens', async () => {
    const [a, b] = [await generateAll(), await generateAll()];
    expect([...a.keys()].sort()).toEqual([...b.keys()].sort());
    // The sample trace is a recording (its actor ids count on within one process); the test
    // above compares it with the committed copy, which a fresh process reproduces.
    for (const [name, text] of a) {
      if (name === 'sample-trace.js') continue;
      expect(b.get(name), name).toBe(text);
      expect(text, name).not.toMatch(/\d{4}-\d{2}-\d{2}T/);
    }
    expect([...a.keys()].filter((n) => n.endsWith('.json'))).toEqual([]);
  });
});

describe('Mermaid converter', () => {
  it('draws nesting, parallel regions, initial/final, guards, invokes, delays and always', () => {
    const tiny = setup({
      actors: { load: fromPromise(async () => 1) },
      guards: { 'has input': () => true, 'is ready': () => true },
      delays: { patience: 1000 },
    }).createMachine({
      id: 'tiny',
      initial: 'idle',
      states: {
        idle: {
          always: { guard: 'is ready', target: 'busy' },
          on: { go: { guard: 'has input', target: 'busy' }, poke: {} },
        },
        busy: {
          type: 'parallel',
          on: { cancel: 'idle' },
          states: {
            fetch: {
              initial: 'loading',
              states: {
                loading: { invoke: { src: 'load', onDone: 'loaded', onError: '#tiny.failed' } },
                loaded: { type: 'final' },
              },
            },
            'time-out': {
              initial: 'waiting',
              states: { waiting: { after: { patience: 'expired', 50: 'expired' } }, expired: {} },
            },
          },
        },
        failed: { type: 'final' },
      },
    });
    expect(toMermaid(tiny).text).toBe(`%% tiny: generated from the machine by \`npm run visualize\` (visualizer/mermaid.ts). Do not edit.
stateDiagram-v2
  state "tiny" as tiny {
    [*] --> tiny__idle
    state "idle" as tiny__idle
    state "busy" as tiny__busy {
      state "fetch" as tiny__busy__fetch {
        [*] --> tiny__busy__fetch__loading
        state "loading" as tiny__busy__fetch__loading
        tiny__busy__fetch__loading : invoke load
        state "loaded" as tiny__busy__fetch__loaded
        tiny__busy__fetch__loaded --> [*]
      }
      --
      state "time-out" as tiny__busy__time_out {
        [*] --> tiny__busy__time_out__waiting
        state "waiting" as tiny__busy__time_out__waiting
        state "expired" as tiny__busy__time_out__expired
      }
    }
    state "failed" as tiny__failed
    tiny__failed --> [*]
  }
  tiny__idle --> tiny__busy : go [has input]
  tiny__idle --> tiny__idle : poke
  tiny__idle --> tiny__busy : always [is ready]
  tiny__busy__fetch__loading --> tiny__busy__fetch__loaded : done: load
  tiny__busy__fetch__loading --> tiny__failed : error: load
  tiny__busy__time_out__waiting --> tiny__busy__time_out__expired : after 50ms
  tiny__busy__time_out__waiting --> tiny__busy__time_out__expired : after patience
  tiny__busy --> tiny__idle : cancel
`);
  });

  it('refuses two states that would share a Mermaid id', () => {
    const clash = setup({}).createMachine({ id: 'c', initial: 'a-b', states: { 'a-b': {}, a_b: {} } });
    expect(() => toMermaid(clash)).toThrow(/'c\.a-b' and 'c\.a_b'|'c\.a_b' and 'c\.a-b'/);
  });
});

describe('trace recorder', () => {
  const stateSteps = (trace: Trace, machine: string) => trace.steps.filter((s): s is TraceStateStep => s.kind === 'state' && s.machine === machine);

  it('records a real compaction: each chart step, with the session events interleaved where they were written', async () => {
    const run = await recordSampleCompaction();
    expect(run.afterStep.status).toBe('compacted');
    expect(run.manual).not.toBeNull();
    const { trace } = run;

    const firstTx = trace.actors.find((a) => a.machine === 'transaction')!;
    expect(trace.actors.find((a) => a.id === firstTx.parent)?.machine).toBe('pressure');
    const txValues = stateSteps(trace, 'transaction')
      .filter((s) => s.actor === firstTx.id)
      .map((s) => s.value);
    expect(txValues).toEqual(['validating', 'opening', 'summarizing', 'revalidating', 'committing', 'flushing', 'committed']);

    // Where each append landed: after the step that entered the state whose invoked service wrote it.
    const sequence = trace.steps.map((s) => (s.kind === 'state' ? `${s.machine}:${JSON.stringify(s.value)}` : s.type));
    const at = (label: string) => sequence.indexOf(label);
    expect(at('compaction/start')).toBe(at('transaction:"opening"') + 1);
    expect(sequence.slice(at('transaction:"committing"') + 1, at('transaction:"flushing"'))).toEqual(['compaction/summary', 'user/message', 'compaction/end']);
    const checkpoint = trace.steps.find((s): s is TraceSessionStep => s.kind === 'session' && s.type === 'user/message' && s.surfaceOp === 'replace');
    expect(checkpoint?.replaces).toHaveLength(2);

    // Every append is recorded, in log order; times never go backwards.
    const seqs = trace.steps.filter((s): s is TraceSessionStep => s.kind === 'session').map((s) => s.seq);
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
    const times = trace.steps.map((s) => s.t);
    expect(times).toEqual([...times].sort((a, b) => a - b));

    // Small, serialisable, and free of conversation text.
    const json = JSON.stringify(trace);
    expect(JSON.parse(json)).toEqual(trace);
    expect(json.length).toBeLessThan(50_000);
    expect(json).not.toContain('summary of');
    expect(json).not.toContain('Please fix the build');
  });

  it('saves JSON, or a script for index.html?trace=', async () => {
    const session = Session.inMemory();
    const recorder = createTraceRecorder(session);
    session.append({ type: 'turn/start', data: { turn: 0 } });
    recorder.stop();
    session.append({ type: 'turn/end', data: { turn: 0 } });
    const dir = mkdtempSync(join(tmpdir(), 'xcompact-trace-'));
    try {
      await recorder.save(join(dir, 't.json'));
      await recorder.save(join(dir, 'nested', 't.js'));
      const saved = JSON.parse(readFileSync(join(dir, 't.json'), 'utf8')) as Trace;
      expect(saved).toEqual({
        format: 'xcompact-trace',
        version: 1,
        actors: [],
        steps: [{ kind: 'session', t: expect.any(Number), seq: 0, type: 'turn/start' }],
      });
      const script = readFileSync(join(dir, 'nested', 't.js'), 'utf8');
      expect(script.startsWith('window.XCOMPACT_TRACE = ')).toBe(true);
      expect(JSON.parse(script.replace('window.XCOMPACT_TRACE = ', '').replace(/;\n$/, ''))).toEqual(saved);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes a live trace as it happens: one call per line, the same trace at every point', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'xcompact-trace-'));
    const live = join(dir, 'nested', 'trace.live.js');
    const replay = (text: string): Trace => {
      const records: LiveTraceRecord[] = [];
      new Function('xcompactTrace', text)((r: LiveTraceRecord) => records.push(r));
      expect(records[0]).toEqual({ format: 'xcompact-trace', version: 1 });
      const actors = records.flatMap((r) => ('actor' in r ? [r.actor] : []));
      const steps = records.flatMap((r) => ('step' in r ? [r.step] : []));
      return { format: 'xcompact-trace', version: 1, actors, steps };
    };
    const session = Session.inMemory();
    const recorder = createTraceRecorder(session, { follow: live });
    expect(replay(readFileSync(live, 'utf8')).steps).toEqual([]);
    session.append({ type: 'turn/start', data: { turn: 0 } });
    expect(replay(readFileSync(live, 'utf8'))).toEqual(recorder.toJSON()); // written at once, not at save()
    recorder.stop();

    const { trace } = await recordSampleCompaction({ follow: live });
    const text = readFileSync(live, 'utf8');
    // The sample takes its trace before it stops the engine; the live file goes on to the shutdown.
    const followed = replay(text);
    expect(followed.steps.slice(0, trace.steps.length)).toEqual(trace.steps);
    expect(followed.steps.length).toBeGreaterThan(trace.steps.length);
    expect(followed.actors.slice(0, trace.actors.length)).toEqual(trace.actors);
    expect(
      text
        .split('\n')
        .filter(Boolean)
        .every((line) => /^xcompactTrace\(\{.*\}\);$/.test(line)),
    ).toBe(true);
    rmSync(dir, { recursive: true, force: true });
  });
});
