/**
 * The local server's side of a scenario: a scripted model that answers the loop's requests as
 * the scenario says (tool calls naming fixture files, text answers, provider overflow bodies)
 * and summary requests with the scenario's summary outcome (a summary, a 500, a cut reply, tool
 * calls only, a stalled stream, or one that hangs until cancelled).
 */
import { COMPACTION_INSTRUCTION } from '../../services/summarizing';
import { OTHER_ERROR_BODIES, OVERFLOW_BODIES } from '../error-bodies';
import type { ChatRequestBody, ParsedChatRequest, Scenario, ScenarioHandler } from '../scenarios';
import type { LoopScenario } from './scenarios';

const INSTRUCTION_HEAD = COMPACTION_INSTRUCTION.slice(0, 60);

function textOf(content: unknown): string {
  return typeof content === 'string' ? content : Array.isArray(content) ? content.map((p) => (p as { text?: string }).text ?? '').join('') : '';
}

/** A summary request ends with the compaction instruction as its last user message. */
export function isSummaryRequest(body: ChatRequestBody): boolean {
  const last = body.messages?.[body.messages.length - 1];
  if (last?.role !== 'user') return false;
  return textOf(last.content).startsWith(INSTRUCTION_HEAD);
}

export interface ScriptEvents {
  /** The request at which the scenario crashes the process (the handler then leaves it hanging). */
  onCrashPoint(): void;
  /** The summary request at which the scenario cancels the loop (its index in the server's requests); it hangs until the client lets it go. */
  onCancelPoint(index: number): void;
}

export interface ScenarioServerScript {
  handler: ScenarioHandler;
  /** Indexes (in server.requests) of the agent requests answered with an overflow error. */
  readonly overflowed: Set<number>;
  /** After a crash, the script answers as if it were a fresh run (no second crash, no second overflow). */
  resume(): void;
}

const SUMMARY_TEXT = [
  '## Primary Request and Intent',
  'The user asked to fix the parser bug described in the notes.',
  '## Key Technical Concepts',
  'Retry budget shared by every worker.',
  '## Files and Code',
  '(none)',
  '## Errors and Fixes',
  '(none)',
  '## Pending Jobs',
  '(none)',
  '## Current Work',
  'Reading the notes.',
  '## Next Step',
  'Fix the retry budget.',
  '## Critical Context',
  '(none)',
].join('\n');

/** The first function tool of the request, with arguments naming `fixture` in every string field. */
function toolCallFor(body: ChatRequestBody, fixture: string, id: string): { id: string; name: string; arguments: string } | undefined {
  for (const tool of body.tools ?? []) {
    const t = tool as { type?: string; function?: { name?: string; parameters?: { properties?: Record<string, { type?: string }>; required?: string[] } } };
    if (t.type !== 'function' || !t.function?.name) continue;
    const props = t.function.parameters?.properties ?? {};
    const args: Record<string, string> = {};
    for (const [key, schema] of Object.entries(props)) if (schema.type === 'string' || schema.type === undefined) args[key] = fixture;
    return { id, name: t.function.name, arguments: JSON.stringify(args) };
  }
  return undefined;
}

export function scenarioScript(scenario: LoopScenario, events: ScriptEvents): ScenarioServerScript {
  const s = scenario.script;
  const overflowed = new Set<number>();
  let resumed = false;
  let crashed = false;
  let overflowSent = false;
  let summaries = 0;
  let cancelled = false;
  let calls = 0;
  let replies = 0;
  let followUpSent = false;
  let inScenarioTurn = false;

  const summaryReply = (index: number): Scenario => {
    summaries++;
    if (s.cancelAtSummary && !cancelled) {
      cancelled = true;
      events.onCancelPoint(index);
      return { kind: 'hang', sendHeaders: true };
    }
    const outcome = s.summary;
    // The breaker scenario: the first summaries fail until the breaker opens (each counted, even where a
    // truncation checkpoint stands in for it); after its cooldown they succeed.
    if (outcome === 'breaker')
      return summaries <= 2 ? { kind: 'status', ...OTHER_ERROR_BODIES.serverError } : { kind: 'reply', content: SUMMARY_TEXT, delayMs: s.summaryDelayMs };
    if (outcome === 'fails') return { kind: 'status', ...OTHER_ERROR_BODIES.serverError };
    if (outcome === 'truncated') return { kind: 'reply', content: SUMMARY_TEXT.slice(0, 80), finishReason: 'length', delayMs: s.summaryDelayMs };
    if (outcome === 'refused')
      return { kind: 'reply', toolCalls: [{ id: `call_summary_${summaries}`, name: 'read_file', arguments: '{}' }], delayMs: s.summaryDelayMs };
    if (outcome === 'stalls') return { kind: 'hang', sendHeaders: true, afterChunks: 1 };
    if (outcome === 'hang') return { kind: 'hang', sendHeaders: true };
    return { kind: 'reply', content: SUMMARY_TEXT, delayMs: s.summaryDelayMs };
  };

  const agentReply = (req: ParsedChatRequest): Scenario => {
    const body = req.body;
    const messages = body.messages ?? [];
    const last = messages[messages.length - 1];
    const userTurns = messages.filter((m) => m.role === 'user').length;
    // The scenario's own turn from the request carrying its prompt on: a compaction may leave fewer user messages than turns.
    const prompt = scenario.turns[scenario.turns.length - 1];
    if (messages.some((m) => m.role === 'user' && textOf(m.content) === prompt)) inScenarioTurn = true;
    const isScenarioTurn = inScenarioTurn || userTurns >= scenario.turns.length || scenario.turns.length === 1;
    if (last?.role !== 'tool' && isScenarioTurn) {
      if (s.crashAt === 'turn-request' && !crashed && !resumed) {
        crashed = true;
        events.onCrashPoint();
        return { kind: 'hang', sendHeaders: false };
      }
      if (s.toolFixture && last?.role === 'user') {
        const batch = Array.from({ length: s.parallelCalls ?? 1 }, () => toolCallFor(body, s.toolFixture!, `call_${++calls}`));
        if (batch[0]) return { kind: 'reply', toolCalls: batch.filter((c) => c !== undefined) };
      }
    }
    // The overflow: after the tool step when the turn has one, else at once.
    if (s.overflow && !overflowSent && isScenarioTurn && (s.toolFixture ? last?.role === 'tool' : true)) {
      overflowSent = true;
      overflowed.add(req.index);
      const overflow = OVERFLOW_BODIES[s.overflow];
      return { kind: 'status', status: overflow.status, body: overflow.body };
    }
    // In a crash scenario only after the reopen: the follow-up is for the commit the resumed run makes.
    if (s.followUpFixture && !followUpSent && isScenarioTurn && last?.role === 'tool' && (!s.crashAt || resumed)) {
      followUpSent = true;
      const call = toolCallFor(body, s.followUpFixture, `call_${++calls}`);
      if (call) return { kind: 'reply', toolCalls: [call] };
    }
    const extra = s.extraToolSteps ?? [];
    if (last?.role === 'tool' && calls >= 1 && calls <= extra.length) {
      const delayMs = extra[calls - 1]!;
      const call = toolCallFor(body, s.extraToolFixtures?.[calls - 1] ?? 'notes-tiny.txt', `call_${++calls}`);
      if (call) return { kind: 'reply', toolCalls: [call], delayMs };
    }
    // Every answer its own text: a message a loop sends twice is told from two answers alike.
    return { kind: 'reply', content: `Done (turn ${userTurns}, reply ${++replies}).`, delayMs: last?.role === 'tool' ? s.answerDelayMs : 0 };
  };

  return {
    overflowed,
    resume() {
      resumed = true;
    },
    handler: (req) => {
      if (isSummaryRequest(req.body)) {
        if (s.crashAt === 'summary-request' && !crashed && !resumed) {
          crashed = true;
          events.onCrashPoint();
          return { kind: 'hang', sendHeaders: false };
        }
        return summaryReply(req.index);
      }
      return agentReply(req);
    },
  };
}
