// Search value escaping (https://hl7.org/fhir/R4/search.html#escaping): `\,` `\$` `\|` and `\\` stand
// for the character itself; unescaped `,` separates OR values, `$` composite parts, `|` token parts.

/** Splits on every unescaped `separator`, keeping the escapes in the parts (unescape each part later). */
export function splitUnescaped(value: string, separator: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === '\\' && i + 1 < value.length) {
      current += c + value[i + 1];
      i++;
    } else if (c === separator) {
      parts.push(current);
      current = '';
    } else current += c;
  }
  parts.push(current);
  return parts;
}

/** Removes the escaping backslashes. */
export function unescapeValue(value: string): string {
  return value.replace(/\\(.)/g, '$1');
}
