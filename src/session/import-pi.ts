/**
 * Imports a transcript recorded by the pi coding agent (github.com/badlogic/pi-mono, JSONL
 * lines of type `session`, `message`, `model_change`, …) into a Session, turn by turn:
 * each user message opens a turn, each assistant message is a step with its request
 * header, and tool results follow their calls.
 *
 * pi records calls that never got a result (aborted runs). A request with such a call is
 * invalid for every OpenAI-compatible API, so the importer answers each one with an error
 * result that says so, and counts it: nothing is dropped silently.
 */
import { readFile } from 'node:fs/promises';
import { XcompactError } from '../errors';
import type { AppendInput, ImageBlock, TextBlock, Usage } from './events';
import { Session } from './session';
import { SessionWriter } from './writer';

export interface PiImportReport {
  lines: number;
  turns: number;
  userMessages: number;
  assistantMessages: number;
  toolCalls: number;
  toolResults: number;
  /** Calls pi recorded without a result, answered with an error result on import. */
  synthesizedResults: number;
  /** Line types with no session meaning here (thinking-level changes, …), by type. */
  ignored: Record<string, number>;
}

export interface PiImportOptions {
  /** A system prompt to put at surface node 0 (pi does not record its own). */
  systemPrompt?: string;
  /** Tool definitions to record on every request header (pi does not record them). */
  tools?: Record<string, unknown>[];
}

export class PiImportError extends XcompactError {
  constructor(message: string) {
    super('import', message);
  }
}

const MISSING_RESULT = 'No result was recorded for this tool call (the run was aborted before it finished).';

interface PiBlock {
  type: string;
  text?: string;
  thinking?: string;
  id?: string;
  name?: string;
  arguments?: unknown;
  data?: string;
  mimeType?: string;
}

interface PiUsage {
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheWrite?: number;
}

function usageOf(u: PiUsage | undefined): Usage | undefined {
  if (!u) return undefined;
  const cacheRead = u.cacheRead ?? 0;
  const cacheWrite = u.cacheWrite ?? 0;
  // pi (Anthropic-style) counts cache reads and writes apart from input; ours includes them.
  return {
    promptTokens: (u.input ?? 0) + cacheRead + cacheWrite,
    completionTokens: u.output ?? 0,
    cachedTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
  };
}

function userBlocks(content: unknown): Array<TextBlock | ImageBlock> {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const out: Array<TextBlock | ImageBlock> = [];
  for (const b of (content ?? []) as PiBlock[]) {
    if (b.type === 'text') out.push({ type: 'text', text: b.text ?? '' });
    else if (b.type === 'image' && b.data) out.push({ type: 'image', url: `data:${b.mimeType ?? 'image/png'};base64,${b.data}` });
  }
  return out.length > 0 ? out : [{ type: 'text', text: '' }];
}

/** Imports pi JSONL text into an empty session, all or nothing. */
export function importPiTranscript(target: Session, jsonl: string, options: PiImportOptions = {}): PiImportReport {
  if (target.length > 0) {
    throw new PiImportError(`a pi transcript is imported into an empty session; session "${target.id}" already has ${target.length} events.`);
  }
  // All or nothing: the transcript is imported into a scratch session first, so a bad line
  // halfway through leaves the target (and its store) untouched.
  const session = Session.inMemory('pi-import');
  const report = importInto(session, jsonl, options);
  for (const e of session.events()) {
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs;
    target.append(input);
  }
  return report;
}

function importInto(session: Session, jsonl: string, options: PiImportOptions): PiImportReport {
  const w = new SessionWriter(session);
  const report: PiImportReport = {
    lines: 0,
    turns: 0,
    userMessages: 0,
    assistantMessages: 0,
    toolCalls: 0,
    toolResults: 0,
    synthesizedResults: 0,
    ignored: {},
  };
  let provider = 'unknown';
  let model = 'unknown';
  if (options.systemPrompt !== undefined) w.system(options.systemPrompt);

  const answerPending = () => {
    for (const callId of session.surface.pendingCalls()) {
      w.toolResult(callId, MISSING_RESULT, { isError: true });
      report.synthesizedResults++;
    }
  };
  const closeStep = () => {
    answerPending();
    if (session.openStep) w.endStep();
  };

  const lines = jsonl.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const text = lines[i]!.trim();
    if (text === '') continue;
    report.lines++;
    let entry: { type?: string; provider?: string; modelId?: string; message?: Record<string, unknown> };
    try {
      entry = JSON.parse(text) as typeof entry;
    } catch (err) {
      throw new PiImportError(`pi transcript line ${i + 1} is not valid JSON: ${(err as Error).message}`);
    }
    try {
      if (entry.type === 'session' || entry.type === 'model_change') {
        if (entry.provider) provider = entry.provider;
        if (entry.modelId) model = entry.modelId;
        continue;
      }
      if (entry.type !== 'message' || !entry.message) {
        const t = String(entry.type);
        report.ignored[t] = (report.ignored[t] ?? 0) + 1;
        continue;
      }
      const m = entry.message;
      if (m.role === 'user') {
        closeStep();
        if (session.openTurn !== null) w.endTurn();
        w.startTurn();
        report.turns++;
        w.user(userBlocks(m.content));
        report.userMessages++;
      } else if (m.role === 'assistant') {
        if (session.openTurn === null) {
          w.startTurn();
          report.turns++;
        }
        closeStep();
        w.startStep();
        const msgProvider = typeof m.provider === 'string' ? m.provider : provider;
        const msgModel = typeof m.model === 'string' ? m.model : model;
        w.request({ provider: msgProvider, model: msgModel, tools: options.tools ?? [] });
        const blocks = (m.content ?? []) as PiBlock[];
        const textParts = blocks.filter((b) => b.type === 'text').map((b) => b.text ?? '');
        const reasoning = blocks.filter((b) => b.type === 'thinking').map((b) => b.thinking ?? '').join('\n\n');
        const calls = blocks
          .filter((b) => b.type === 'toolCall')
          .map((b) => ({ id: String(b.id), name: String(b.name), arguments: JSON.stringify(b.arguments ?? {}) }));
        const usage = usageOf(m.usage as PiUsage | undefined);
        w.assistant({
          ...(textParts.length > 0 ? { text: textParts.join('\n\n') } : {}),
          ...(reasoning ? { reasoning } : {}),
          toolCalls: calls,
          ...(usage ? { usage } : {}),
          provider: msgProvider,
          model: msgModel,
          ...(typeof m.stopReason === 'string' ? { finishReason: m.stopReason } : {}),
        });
        report.assistantMessages++;
        report.toolCalls += calls.length;
      } else if (m.role === 'toolResult') {
        w.toolResult(String(m.toolCallId), userBlocks(m.content), {
          ...(m.isError === true ? { isError: true } : {}),
          ...(typeof m.toolName === 'string' ? { toolName: m.toolName } : {}),
        });
        report.toolResults++;
      } else {
        const t = `message:${String(m.role)}`;
        report.ignored[t] = (report.ignored[t] ?? 0) + 1;
      }
    } catch (err) {
      if (err instanceof PiImportError) throw err;
      throw new PiImportError(`pi transcript line ${i + 1}: ${(err as Error).message}`);
    }
  }
  closeStep();
  if (session.openTurn !== null) w.endTurn();
  return report;
}

export async function importPiFile(session: Session, path: string, options: PiImportOptions = {}): Promise<PiImportReport> {
  return importPiTranscript(session, await readFile(path, 'utf8'), options);
}
