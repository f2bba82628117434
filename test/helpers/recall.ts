/**
 * Sessions with history off the surface, made by the real engine (extractive summaries, no
 * model) and the real pruner: a coding agent that reads files, hits an error, writes a file.
 */
import { createCompactionEngine } from '../../src/engine/facade';
import { Session } from '../../src/session/session';
import { SessionWriter } from '../../src/session/writer';
import { applyPrune, planPrune } from '../../src/services/pruning';

export const PROVIDER = 'deepseek';
export const MODEL = 'deepseek-chat';
export const MODELS = { [`${PROVIDER}/${MODEL}`]: { contextWindow: 200_000, maxOutputTokens: 4_000 } };

export function fileText(path: string, lines = 40): string {
  return Array.from({ length: lines }, (_, i) => `// ${path} line ${i}: export const v${i} = ${i * 7};`).join('\n');
}

/** One agent turn: the user asks, the model reads `paths` one call per step, then answers. */
export function readTurn(w: SessionWriter, ask: string, paths: readonly string[], answer: string): void {
  w.startTurn();
  w.request({ provider: PROVIDER, model: MODEL, tools: [] });
  w.user(ask);
  for (const [i, path] of paths.entries()) {
    w.startStep();
    w.request({ provider: PROVIDER, model: MODEL, tools: [] });
    const id = `call_${w.session.length}_${i}`;
    w.assistant({ text: `Reading ${path}.`, toolCalls: [{ id, name: 'read', arguments: JSON.stringify({ path }) }] });
    w.toolResult(id, fileText(path), { toolName: 'read' });
    w.endStep();
  }
  w.startStep();
  w.request({ provider: PROVIDER, model: MODEL, tools: [] });
  w.assistant({ text: answer });
  w.endStep();
  w.endTurn();
}

/** A turn whose tool fails with an error line. */
export function errorTurn(w: SessionWriter, command: string, error: string): void {
  w.startTurn();
  w.request({ provider: PROVIDER, model: MODEL, tools: [] });
  w.user(`Run ${command}.`);
  w.startStep();
  w.request({ provider: PROVIDER, model: MODEL, tools: [] });
  const id = `call_${w.session.length}`;
  w.assistant({ toolCalls: [{ id, name: 'bash', arguments: JSON.stringify({ command }) }] });
  w.toolResult(id, `$ ${command}\nstarting…\n${error}\nexit code 1`, { toolName: 'bash', isError: true });
  w.endStep();
  w.startStep();
  w.request({ provider: PROVIDER, model: MODEL, tools: [] });
  w.assistant({ text: 'The command failed; I will look into it.' });
  w.endStep();
  w.endTurn();
}

/** Compacts everything but the newest unit, model-free (manual /compact). */
export async function compact(session: Session, config: Record<string, unknown> = {}): Promise<number> {
  const engine = createCompactionEngine({ session, models: MODELS, config: { economics: false, background: false, ...config } });
  try {
    const record = await engine.compactNow();
    if (record === null) throw new Error('nothing was compacted');
    // The checkpoint's handle names its bracket: compaction/start is the first of its sources.
    return session.event(record.checkpointSeq).sourceEventSeqs![0]!;
  } finally {
    engine.stop();
  }
}

/** Prunes every tool result over `thresholdChars` (no protected tail, no minimum). */
export function pruneAll(session: Session, thresholdChars = 1_000, recall?: boolean): number[] {
  const settings = {
    thresholdChars,
    headChars: 200,
    tailChars: 100,
    protectRecentTokens: 0,
    minReclaimTokens: 0,
    neverPrune: [],
    ...(recall ? { recall } : {}),
  };
  const price = (text: string) => Math.ceil(text.length / 4) + 4;
  const pricing = {
    priceOf: (seq: number) => price(JSON.stringify(session.event(seq).data)),
    priceEvent: (e: { data: unknown }) => price(JSON.stringify(e.data)),
  };
  const plan = planPrune(session, settings, pricing);
  return applyPrune(session, plan).pruned.map((p) => p.seq);
}

export function newSession(): { session: Session; w: SessionWriter } {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  w.system('You are a coding agent.');
  return { session, w };
}
