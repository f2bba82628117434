/** The replay moved to the shipped eval library (src/eval/replay.ts); tests import it from here. */
export { replayThroughEngine, type ReplayHooks } from '../../src/eval/replay';
