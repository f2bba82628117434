/**
 * Recall regular expressions in linear time (docs/recall.md): one call's wall time, and
 * whether the 60 ms budget cut it, at 50k events (the synthetic coding session of
 * bench/recall.ts) and on a session whose one shadowed text is 1 MB, for ordinary patterns
 * and for the hostile ones that froze the backtracking engine.
 *
 *   npx tsx bench/recall-linear.ts
 */
import { performance } from 'node:perf_hooks';
import { recallTool } from '../src/services/recall/index';
import { Session } from '../src/session/session';
import { SessionWriter } from '../src/session/writer';
import { COMPACTION_CHECKPOINT_SOURCE } from '../src/session/events';
import { buildForProfile } from './recall';

const ORDINARY = ['Error: \\w+ failed', 'E\\d{3,}', 'zebra-quokka', 'src/\\w+/\\w+-\\d+\\.ts'];
const HOSTILE = ['(a|aa)+X', '.*.*.*.*.*.*X', '(\\w|a)*X', '(a+)+', '(a*)*$X', '(.*a){12}X'];

/** A session whose one shadowed tool result is `text`, under a checkpoint. */
function oneBigText(text: string): Session {
  const session = Session.inMemory('big');
  const w = new SessionWriter(session);
  w.system('You are a coding agent.');
  w.startTurn();
  w.request({ provider: 'bench', model: 'm', tools: [] });
  w.user('Show the log.');
  w.startStep();
  w.request({ provider: 'bench', model: 'm', tools: [] });
  w.assistant({ toolCalls: [{ id: 'c1', name: 'bash', arguments: '{"command":"cat big.log"}' }] });
  const result = w.toolResult('c1', text, { toolName: 'bash' });
  w.endStep();
  w.endTurn();
  const start = session.append({ type: 'compaction/start', data: { turn: null, trigger: 'manual' } });
  const shadowed = session.surface.slice(1);
  const summary = session.append({
    type: 'compaction/summary',
    data: { summary: 'A log was shown.', range: { start: shadowed[0]!, end: shadowed.at(-1)! }, shadowedSeqs: shadowed, shadowedTokens: 250_000 },
  });
  session.append({
    type: 'user/message',
    data: {
      content: [{ type: 'text', text: `<compacted-summary>\nA log was shown (seq ${result.seq}).\n</compacted-summary>` }],
      source: COMPACTION_CHECKPOINT_SOURCE,
    },
    surfaceOp: { op: 'replace', start: shadowed[0]!, end: shadowed.at(-1)! },
    sourceEventSeqs: [start.seq, summary.seq, ...shadowed],
  });
  session.append({ type: 'compaction/end', data: { turn: null } });
  return session;
}

function row(label: string, session: Session, patterns: readonly string[]): void {
  const tool = recallTool(session);
  for (const query of patterns) {
    tool.run({ query, regex: true }); // warm
    const ms: number[] = [];
    let out = tool.run({ query, regex: true });
    for (let i = 0; i < 9; i++) {
      const t = performance.now();
      out = tool.run({ query, regex: true });
      ms.push(performance.now() - t);
    }
    ms.sort((a, b) => a - b);
    const cut = /time budget ran out/.test(out.text);
    const searched = /searched the newest (\d+) of (\d+)/.exec(out.text);
    console.log(
      `${label.padEnd(22)} ${query.padEnd(26)} median ${ms[4]!.toFixed(1).padStart(6)} ms  max ${ms[8]!.toFixed(1).padStart(6)} ms  matches ${String(out.matches).padStart(5)}  ${cut ? `cut by the budget (${searched ? `${searched[1]} of ${searched[2]} messages` : 'within the newest text'})` : 'whole history searched'}`,
    );
  }
}

const big = buildForProfile(50_000);
console.log(`50k events: ${big.session.length} events`);
row('50k events', big.session, [...ORDINARY, ...HOSTILE]);
const mb = `${'a'.repeat(500_000)}\n${Array.from({ length: 25_000 }, (_, i) => `line ${i}: value=${i * 7} ok`).join('\n')}`.slice(0, 1_000_000);
row('1 MB shadowed text', oneBigText(mb), ['line 12000: value', 'value=\\d+7 ok', ...HOSTILE]);
row('20,000 a', oneBigText('a'.repeat(20_000)), HOSTILE);
