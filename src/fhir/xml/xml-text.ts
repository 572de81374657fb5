// The characters of FHIR XML (https://hl7.org/fhir/R4/xml.html): namespaces, and text escaped so that an
// XML parser reads back exactly the string written.

export const FHIR_NS = 'http://hl7.org/fhir';
export const XHTML_NS = 'http://www.w3.org/1999/xhtml';

/**
 * Characters XML 1.0 cannot carry at all (not even as a character reference): C0 controls but tab, LF
 * and CR, U+FFFE, U+FFFF and unpaired surrogates. Stored FHIR text never holds the controls (the
 * validator refuses them), but an error message may quote what a client sent.
 */
const NOT_XML =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
// eslint-disable-next-line no-control-regex
const NEEDS_ATTRIBUTE_ESCAPE = /[&<>"\t\n\r\u0000-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/;
// eslint-disable-next-line no-control-regex
const NEEDS_TEXT_ESCAPE = /[&<>\r\u0000-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/;

const ATTRIBUTE_ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  // Literal tab, LF and CR in an attribute are read back as spaces (XML's attribute-value normalisation).
  '\t': '&#x9;',
  '\n': '&#xA;',
  '\r': '&#xD;',
};

/** An attribute value between double quotes. */
export function escapeAttribute(value: string): string {
  if (!NEEDS_ATTRIBUTE_ESCAPE.test(value)) return value;
  return value.replace(NOT_XML, '\uFFFD').replace(/[&<>"\t\n\r]/g, (c) => ATTRIBUTE_ESCAPES[c]);
}

/** Character data. A literal CR would be read back as LF (XML's end-of-line handling). */
export function escapeText(value: string): string {
  if (!NEEDS_TEXT_ESCAPE.test(value)) return value;
  return value.replace(NOT_XML, '\uFFFD').replace(/[&<>\r]/g, (c) => ATTRIBUTE_ESCAPES[c]);
}
