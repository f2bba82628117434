/**
 * The harness's own summaries beside xcompact's, on the same span: for every compaction a
 * recorded session holds (imported as a checkpoint) whose text is readable, xcompact's
 * summarizer condenses exactly the history the harness condensed, and both summaries are
 * scored on the same requests — those the harness sent until its next compaction, once as
 * recorded and once with xcompact's checkpoint in the harness's place — by the memory measures
 * every policy is measured with (memory.ts): needed recall, intent recall, and needed recall at
 * the first request after the compaction. Each summary's size is counted as the replay counts
 * requests (calibration.ts).
 */
import { ExtractiveSummarizer, frameCheckpoint, type Summarizer } from '../services/summarizing';
import { toChatMessage, type ChatMessage } from '../session/derive';
import { isCheckpoint, isSurfaceType, type AppendInput, type SurfaceEvent } from '../session/events';
import { Session } from '../session/session';
import { withoutCompactions } from './lived';
import { MemoryMeter, transcriptOf, type RequestMemory } from './memory';
import type { Pricer } from './pricing';

/** How one summary did on the requests it was sent with. */
export interface SummaryScore {
  /** Its checkpoint message's tokens. */
  tokens: number;
  /** Mean needed recall over the requests with a needed fact (1 with none). */
  neededRecall: number;
  /** Needed recall at the first request after the compaction (undefined: it needed no fact). */
  firstRequestRecall: number | undefined;
  /** Share of the earlier user messages' intent keys present, over all (request, message) pairs (1 with none). */
  intentRecall: number;
}

export interface SummaryComparison {
  /** Seq of the harness's checkpoint in the imported session. */
  seq: number;
  /** History events the harness condensed. */
  shadowed: number;
  /** Requests scored: from the first after the compaction to the next compaction. */
  requests: number;
  harness: SummaryScore;
  xcompact: SummaryScore;
}

/** Marks a text as one of the harness's own checkpoints that holds no summary (an encrypted or unrecorded one). */
const UNAVAILABLE = /its summary is (?:encrypted|not in the session file)|does not record its summary|text it sent is not available/;

class Scores {
  needed = 0;
  neededSum = 0;
  intents = 0;
  intentHits = 0;
  first: number | undefined;
  seen = 0;

  add(m: RequestMemory): void {
    if (m.needed > 0) {
      this.neededSum += m.recalled / m.needed;
      this.needed++;
      if (this.seen === 0) this.first = m.recalled / m.needed;
    }
    this.intents += m.intents;
    this.intentHits += m.intentsRecalled;
    this.seen++;
  }

  score(tokens: number): SummaryScore {
    return {
      tokens,
      neededRecall: this.needed === 0 ? 1 : this.neededSum / this.needed,
      firstRequestRecall: this.first,
      intentRecall: this.intents === 0 ? 1 : this.intentHits / this.intents,
    };
  }
}

/**
 * Every readable compaction of `recorded` (an imported session: the harness's compactions are
 * checkpoints), its summary beside xcompact's summary of the same span. `summarizer` is
 * xcompact's (default: the extractive one), capped at `maxTokens` with `userWordsTokens` for
 * the user's own words, as in the replay.
 */
export async function compareHarnessSummaries(
  recorded: Session,
  pricer: Pricer,
  options: { summarizer?: Summarizer; maxTokens: number; userWordsTokens?: number },
): Promise<SummaryComparison[]> {
  const events = recorded.events();
  const checkpoints = events.filter((e) => isCheckpoint(e) && !UNAVAILABLE.test(textOf(e as SurfaceEvent)));
  if (checkpoints.length === 0) return [];
  const transcript = transcriptOf(withoutCompactions(recorded).events());
  const summarizer = options.summarizer ?? new ExtractiveSummarizer();
  const out: SummaryComparison[] = [];
  for (const checkpoint of checkpoints) {
    // The history the harness condensed: the events its compaction/summary shadowed.
    const bracket = events.slice(0, checkpoint.seq).findLast((e) => e.type === 'compaction/summary');
    if (bracket?.type !== 'compaction/summary') continue;
    const span = bracket.data.shadowedSeqs.map((s) => events[s]!).filter((e): e is SurfaceEvent => isSurfaceType(e.type));
    const result = await summarizer.summarize(
      {
        system: undefined,
        tools: [],
        context: [],
        messages: span.map((e) => toChatMessage(e)),
        events: span,
        target: { provider: 'xcompact', model: summarizer.name },
        maxTokens: options.maxTokens,
        countTokens: (t) => pricer.count(t),
        ...(options.userWordsTokens ? { userWordsTokens: options.userWordsTokens } : {}),
      },
      new AbortController().signal,
    );
    const ours: ChatMessage = { role: 'user', content: frameCheckpoint(result.text) };
    const scored = scoreSegment(recorded, transcript, checkpoint.seq, ours);
    const harnessMessage = toChatMessage(checkpoint as SurfaceEvent);
    out.push({
      seq: checkpoint.seq,
      shadowed: span.length,
      requests: scored.requests,
      harness: scored.harness.score(pricer.message(harnessMessage)),
      xcompact: scored.xcompact.score(pricer.message(ours)),
    });
  }
  return out;
}

/** The requests from the checkpoint at `seq` to the next compaction, scored as sent and with `ours` in the checkpoint's place. */
function scoreSegment(recorded: Session, transcript: ReturnType<typeof transcriptOf>, seq: number, ours: ChatMessage) {
  const asSent = new MemoryMeter(transcript);
  const swapped = new MemoryMeter(transcript);
  const harness = new Scores();
  const xcompact = new Scores();
  const scratch = Session.inMemory(`${recorded.id}-summaries`);
  let inSegment = false;
  let requests = 0;
  for (const e of recorded.events()) {
    if (isCheckpoint(e)) inSegment = e.seq === seq;
    if (e.type === 'assistant/message') {
      const sent = scratch.deriveMessages();
      if (inSegment) {
        const position = scratch.surface.length > 0 ? positionOf(scratch, seq) : -1;
        harness.add(asSent.observe(sent));
        xcompact.add(swapped.observe(position < 0 ? sent : sent.map((m, i) => (i === position ? ours : m))));
        requests++;
      } else {
        // Outside the segment only the meters' request count moves on.
        asSent.observe([]);
        swapped.observe([]);
      }
    }
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs;
    scratch.append(input);
  }
  return { harness, xcompact, requests };
}

/** The surface position of the node appended as `seq` in the source (the scratch copy keeps seqs). */
function positionOf(scratch: Session, seq: number): number {
  const s = scratch.surface;
  for (let p = 0; p < s.length; p++) if (s.seqAt(p) === seq) return p;
  return -1;
}

function textOf(e: SurfaceEvent): string {
  return e.type === 'user/message' ? e.data.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n') : '';
}
