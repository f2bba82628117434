/** Placeholder until the needed-facts part lands (see bench/recall.ts, part 2). */
export async function runPiRecall(): Promise<void> {}
