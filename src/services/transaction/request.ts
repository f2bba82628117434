/**
 * Builds the request a Summarizer gets for a span: the system prompt and the context before
 * the span, the span's messages and events, the target model and its output cap.
 */
import type { ChatMessage } from '../../session/derive';
import type { SurfaceEvent } from '../../session/events';
import { modelInfoFor, policyFor } from '../config';
import type { ServiceDeps } from '../core';
import type { RangeSelection } from '../selection';
import { routeBudget, summaryTarget } from '../core';
import type { SummaryRequest } from '../summarizing';
import { textsOfMessage, type TokenMeter } from '../metering';
import { getTokenizer, tokenizerId, type Tokenizer } from '../metering';
import { redactDeep } from '../redaction';

/** Summary output cap when neither the config nor a resolvable budget gives one. */
export const FALLBACK_SUMMARY_MAX_TOKENS = 8192;

/**
 * The request's text counter. The meter priced every node of the request already: where it
 * counts with the target's tokenizer, those counts are reused (a bounding summarizer prices the
 * span several times), and any other text is counted once per request.
 */
function requestCounter(tokenizer: Tokenizer, meter: TokenMeter | undefined, nodes: ReadonlyArray<[number, ChatMessage]>): (text: string) => number {
  const known = new Map<string, number>();
  if (meter && tokenizerId(meter.currentTokenizer) === tokenizerId(tokenizer)) {
    for (const [seq, message] of nodes) {
      const counts = meter.textCountsOf(seq);
      if (!counts) continue;
      const texts = textsOfMessage(message);
      if (texts.length !== counts.length) continue;
      for (let i = 0; i < texts.length; i++) known.set(texts[i]!, counts[i]!);
    }
  }
  return (text) => {
    let n = known.get(text);
    if (n === undefined) {
      n = tokenizer.count(text);
      known.set(text, n);
    }
    return n;
  };
}

export function buildSummaryRequest(
  deps: Pick<ServiceDeps, 'session' | 'config' | 'tokenizerName'> & Partial<Pick<ServiceDeps, 'meter' | 'tokenizerFor'>>,
  range: RangeSelection,
  focus: string | undefined,
): SummaryRequest {
  const { session, config } = deps;
  const target = summaryTarget(deps);
  const s = session.surface;
  const system = range.contextPos === 1 ? session.messageAt(0) : undefined;
  const nodes: Array<[number, ChatMessage]> = system ? [[s.seqAt(0), system]] : [];
  const context = [];
  for (let p = range.contextPos; p < range.startPos; p++) {
    context.push(session.messageAt(p));
    nodes.push([s.seqAt(p), context[context.length - 1]!]);
  }
  const messages = [];
  const events: SurfaceEvent[] = [];
  for (let p = range.startPos; p <= range.endPos; p++) {
    messages.push(session.messageAt(p));
    events.push(session.event(s.seqAt(p)) as SurfaceEvent);
    nodes.push([s.seqAt(p), messages[messages.length - 1]!]);
  }
  const targetInfo = modelInfoFor(config, target.provider, target.model);
  let maxTokens: number;
  let userWordsTokens = 0;
  try {
    const budget = routeBudget(deps);
    maxTokens = budget.maxTokens;
    userWordsTokens = budget.userWords;
  } catch {
    // No resolvable budget (overflow recovery without capacity): an explicit cap, else a modest one.
    maxTokens = policyFor(config, target.provider, target.model).maxTokens ?? FALLBACK_SUMMARY_MAX_TOKENS;
  }
  // Never ask for more output than the summarizer model gives: providers reject such requests.
  if (targetInfo?.maxOutputTokens !== undefined) maxTokens = Math.min(maxTokens, targetInfo.maxOutputTokens);
  const targetTokenizer = deps.tokenizerFor?.(target.provider, target.model) ?? getTokenizer(deps.tokenizerName(target.provider, target.model));
  // What leaves the log for the summarizer has its secrets redacted (the log keeps them).
  const redacted = redactDeep({ system, context, messages, events }, config.redaction);
  const request: SummaryRequest = {
    system: redacted.value.system,
    tools: session.latestHeader?.data.tools ?? [],
    context: redacted.value.context,
    messages: redacted.value.messages,
    events: redacted.value.events,
    target,
    maxTokens,
    countTokens: requestCounter(targetTokenizer, deps.meter, nodes),
  };
  if (focus !== undefined) request.focus = focus;
  if (userWordsTokens > 0) request.userWordsTokens = userWordsTokens;
  // The summarizer's own model policy: a slow local summarizer may be given longer.
  request.idleTimeoutMs = policyFor(config, target.provider, target.model).summaryIdleTimeoutMs;
  if (targetInfo?.contextWindow !== undefined) request.contextWindow = targetInfo.contextWindow;
  if (targetInfo?.outputCapField !== undefined) request.outputCapField = targetInfo.outputCapField;
  return request;
}
