/**
 * The inverted word index behind text queries: word → entries holding it. It only narrows the
 * candidates (a superset of the entries that match); every candidate is then checked against
 * the whole query, so the index never decides a match on its own.
 *
 * A word is a maximal run of letters, digits, marks and `_`, lowercased, cut to WORD_MAX code
 * units (a base64 blob is one word, not thousands). In a query, a word bounded by non-word
 * characters on both sides must be a whole word of any text that contains the query; a word at
 * the query's edge may be part of a longer one (a prefix, a suffix, or anything inside).
 *
 * Postings are keyed by a 32-bit hash of the word, computed while scanning (no string is made
 * per occurrence: indexing is one pass over the text). Two words with one hash only widen the
 * candidates, which the check then narrows. Each distinct word is kept once, for the
 * vocabulary scan an edge word needs.
 */
const WORD = /[\p{L}\p{N}\p{M}_]+/gu;
const WORD_CHAR = /[\p{L}\p{N}\p{M}_]/u;
const WORD_MAX = 48;
/**
 * Numbers of more digits (ids, timestamps, sizes: most of a log's distinct words) share
 * NUMBER_BUCKETS postings by their hash, so the index stays proportional to the text, not to its
 * vocabulary of numbers: a whole number in a query still narrows to its bucket (a few entries in
 * thousands), which the check then narrows to the ones that hold it.
 */
const DIGITS_MAX = 3;
const NUMBER_BUCKETS = 65_536;

function cut(word: string): string {
  return word.length > WORD_MAX ? word.slice(0, WORD_MAX) : word;
}

/** A number too long to have postings of its own. */
function bucketed(word: string): boolean {
  return word.length > DIGITS_MAX && /^\d+$/.test(word);
}

/** The postings key of a stored word: its hash, or for a long number its (negative) bucket. */
function keyOf(hash: number, longNumber: boolean): number {
  return longNumber ? -1 - (hash % NUMBER_BUCKETS) : hash;
}

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** The hash the index keys a (lowercased, cut) word by: FNV-1a over its UTF-16 units. */
function hashOf(word: string): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < word.length; i++) h = Math.imul(h ^ word.charCodeAt(i), FNV_PRIME);
  return h >>> 0;
}

/**
 * Calls `each(key, start, end)` for every word of `lower` (already lowercased; [start, end) is
 * the word as stored: cut to WORD_MAX units), duplicates included.
 */
function forEachWord(lower: string, each: (key: number, start: number, end: number) => void): void {
  const n = lower.length;
  let start = -1;
  let h = FNV_OFFSET;
  let digits = true;
  for (let i = 0; i <= n;) {
    let word = false;
    let step = 1;
    let c = 0;
    if (i < n) {
      c = lower.charCodeAt(i);
      if (c < 128) word = (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 95 || (c >= 65 && c <= 90);
      else {
        const cp = lower.codePointAt(i)!;
        if (cp > 0xffff) step = 2;
        word = WORD_CHAR.test(String.fromCodePoint(cp));
      }
    }
    if (word) {
      if (start < 0) {
        start = i;
        h = FNV_OFFSET;
        digits = true;
      }
      for (let k = i; k < i + step; k++) {
        if (k - start >= WORD_MAX) break;
        const u = lower.charCodeAt(k);
        h = Math.imul(h ^ u, FNV_PRIME);
        if (u < 48 || u > 57) digits = false;
      }
    } else if (start >= 0) {
      const end = Math.min(i, start + WORD_MAX);
      each(keyOf(h >>> 0, digits && end - start > DIGITS_MAX), start, end);
      start = -1;
    }
    i += step;
  }
}

export interface QueryTerm {
  word: string;
  /** Non-word character (not the query's edge) just before it. */
  boundedLeft: boolean;
  boundedRight: boolean;
}

export function termsOf(query: string): QueryTerm[] {
  const lower = query.toLowerCase();
  const out: QueryTerm[] = [];
  for (const m of lower.matchAll(WORD)) {
    const start = m.index;
    const end = start + m[0].length;
    out.push({ word: m[0], boundedLeft: start > 0, boundedRight: end < lower.length });
  }
  return out;
}

interface Posting {
  /** Entry ids, ascending. */
  ids: number[];
  /** The stored words with this hash (one, unless two words share a hash). */
  words: string[];
}

export class WordIndex {
  private readonly postings = new Map<number, Posting>();
  private distinct = 0;

  get vocabulary(): number {
    return this.distinct;
  }

  /** Ids must be added in increasing order: a repeated word of the same entry is then one posting. */
  add(id: number, text: string): void {
    const lower = text.toLowerCase();
    forEachWord(lower, (key, start, end) => {
      const p = this.postings.get(key);
      if (p === undefined) {
        // A number bucket keeps no words: edge matching never looks into long numbers.
        this.postings.set(key, { ids: [id], words: key < 0 ? [] : [lower.slice(start, end)] });
        if (key >= 0) this.distinct++;
        return;
      }
      if (p.ids[p.ids.length - 1] === id) return;
      p.ids.push(id);
      if (key < 0) return;
      // The first time in this entry: is it a word this hash already stands for?
      if (!p.words.some((w) => w.length === end - start && lower.startsWith(w, start))) {
        p.words.push(lower.slice(start, end));
        this.distinct++;
      }
    });
  }

  /**
   * Entry ids that may contain `query`, or undefined when words cannot narrow it (no indexed
   * word in it): the caller then checks every entry.
   */
  /** The result may be a posting list itself: read it, never change it. */
  candidates(query: string): readonly number[] | undefined {
    const all = termsOf(query);
    const exact = all.filter((t) => t.boundedLeft && t.boundedRight);
    if (exact.length > 0) {
      const lists = exact
        .map((t) => {
          const w = cut(t.word);
          return this.postings.get(keyOf(hashOf(w), bucketed(w)))?.ids ?? [];
        })
        .sort((a, b) => a.length - b.length);
      return lists.slice(1).reduce(intersect, lists[0]!);
    }
    // Only edge words (a long number at an edge may be part of a longer one: it cannot narrow).
    const terms = all.filter((t) => !bucketed(cut(t.word)));
    if (terms.length === 0) return undefined;
    // The longest edge word narrows best; every vocabulary word that can hold it counts.
    const t = terms.reduce((a, b) => (b.word.length > a.word.length ? b : a));
    const w = cut(t.word);
    if (t.boundedLeft) {
      // A prefix of the text's word: its stored (cut) form starts with the query's cut form.
      return this.collect((v) => v.startsWith(w));
    }
    if (t.word.length >= WORD_MAX) return undefined; // inside a word longer than what is stored: only a scan can tell
    // A suffix, or inside: a stored word that was cut may hold it in the part that was cut off.
    const fits = t.boundedRight ? (v: string) => v.endsWith(w) : (v: string) => v.includes(w);
    return this.collect((v) => v.length === WORD_MAX || fits(v));
  }

  private collect(fits: (word: string) => boolean): number[] {
    const hits = new Set<number>();
    for (const p of this.postings.values()) if (p.words.some(fits)) for (const id of p.ids) hits.add(id);
    return [...hits].sort((a, b) => a - b);
  }
}

function intersect(a: readonly number[], b: readonly number[]): number[] {
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i]! < b[j]!) i++;
    else if (a[i]! > b[j]!) j++;
    else {
      out.push(a[i]!);
      i++;
      j++;
    }
  }
  return out;
}
