// String normalisation for search (https://hl7.org/fhir/R4/search.html#string): case- and
// accent-insensitive matching compares values after NFD decomposition, removal of combining marks and
// lower-casing, so "Chloé" is stored as "chloe" beside the exact text.

// Unicode's combining marks (Mn, Mc, Me): what NFKD splits accents into.
const COMBINING_MARKS = /\p{M}/gu;

/**
 * Printable ASCII words between single spaces: NFKD leaves them as they are, they hold no combining
 * marks and no other white space, so lower-casing is all the normalisation they need. Most indexed
 * texts are like this (codes, names, displays), and the general path's three passes were 4% of what an
 * import allocated.
 */
const PLAIN_ASCII = /^[!-~]+(?: [!-~]+)*$/;

export function normalizeText(value: string): string {
  if (PLAIN_ASCII.test(value)) return value.toLowerCase();
  // ß and similar characters lower-case to themselves; NFKD would also fold ligatures (ﬁ → fi).
  return value.normalize('NFKD').replace(COMBINING_MARKS, '').toLowerCase().trim().replace(/\s+/g, ' ');
}

/** The smallest string greater than every string starting with `prefix` (for index range scans). */
export function prefixUpperBound(prefix: string): string | undefined {
  for (let i = prefix.length - 1; i >= 0; i--) {
    const code = prefix.charCodeAt(i);
    // Skip surrogates and U+FFFF: incrementing them does not give a valid, greater string.
    if (code < 0xd7ff || (code > 0xdfff && code < 0xfffe)) return prefix.slice(0, i) + String.fromCharCode(code + 1);
  }
  return undefined;
}

/** Escapes LIKE wildcards; pair with `ESCAPE '\'`. */
export function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}
