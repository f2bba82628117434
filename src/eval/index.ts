/**
 * `xcompact/eval`: replay recorded sessions through xcompact and simulated peer policies, and
 * measure what each costs and what each remembers (docs/memory.md).
 */
export { evaluate, evaluateWindow, unpaired, DEFAULT_WINDOWS, type EvalOptions, type PolicyRun, type RequestRecord, type WindowEval } from './evaluate';
export {
  MemoryMeter,
  memoryMeasures,
  transcriptOf,
  factsOf,
  pathsIn,
  errorLinesIn,
  argumentFacts,
  intentKey,
  messageText,
  type MemoryFigures,
  type RequestMemory,
  type Transcript,
  type TranscriptMessage,
} from './memory';
export { PEERS, pi, codex, opencode, claudeCode, claudeCodeThreshold, naive } from './peers';
export { simulate, SimState, type PeerPolicy, type Entry, type SimOptions, type SimResult, type RunCounts } from './simulate';
export { Pricer, Ledger, PRICES, PRICE_TABLE, CACHE_MODEL, type PricedRequest, type CountCalibration, type PricerCalibration } from './pricing';
export { replayXcompact, type XcompactRun } from './xcompact';
export { replayThroughEngine, type ReplayHooks } from './replay';
export { partOf, stitched } from './sessions';
export { withoutCompactions } from './lived';
export {
  fitReplayCalibration,
  calibratedPricer,
  reasoningIndex,
  IDENTITY_CALIBRATION,
  type ReplayCalibration,
  type CalibrationFit,
  type CalibrationSegment,
  type Fidelity,
  type FittedRequest,
} from './calibration';
export { asRecorded, recordedMemory, usageCost, type AsRecorded } from './recorded';
export { compareHarnessSummaries, type SummaryComparison, type SummaryScore } from './harness-summaries';
export { smallestWindow, checkWindow, WindowTooSmallError } from './window';
