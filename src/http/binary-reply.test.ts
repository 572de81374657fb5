import { describe, expect, it } from 'vitest';
import { binaryRepresentation } from './binary-reply.js';
import { parseForm } from './body-parsers.js';

describe('binaryRepresentation (https://hl7.org/fhir/R4/http.html#binary)', () => {
  it('answers the content unless a FHIR JSON or XML form is named explicitly', () => {
    for (const accept of [
      undefined,
      '',
      '*/*',
      'application/pdf',
      'image/*',
      'text/html, */*;q=0.8',
      'application/*',
      // Plain XML may be the content's own type (a CDA document): it names no FHIR form.
      'application/xml',
      'text/xml',
    ]) {
      expect(binaryRepresentation(accept, undefined), String(accept)).toBe('content');
    }
    for (const accept of [
      'application/fhir+json',
      'application/json',
      'application/pdf, application/fhir+json;q=0.5',
      'application/fhir+json; fhirVersion=4.0',
      'application/fhir+xml',
      'application/fhir+xml, */*;q=0.1',
      'application/xml+fhir',
    ]) {
      expect(binaryRepresentation(accept, undefined), accept).toBe('resource');
    }
  });

  it('does not count a FHIR form refused (q=0) or for another FHIR version', () => {
    expect(binaryRepresentation('application/fhir+json;q=0, */*', undefined)).toBe('content');
    expect(binaryRepresentation('application/fhir+json; fhirVersion=3.0, */*', undefined)).toBe('content');
    expect(binaryRepresentation('application/fhir+xml;q=0, */*', undefined)).toBe('content');
  });

  it('lets _format override Accept: JSON and XML give the resource, others 406', () => {
    expect(binaryRepresentation('application/pdf', 'json')).toBe('resource');
    expect(binaryRepresentation(undefined, 'application/fhir+json')).toBe('resource');
    expect(binaryRepresentation('application/pdf', 'xml')).toBe('resource');
    expect(binaryRepresentation(undefined, 'application/fhir+xml')).toBe('resource');
    expect(() => binaryRepresentation(undefined, 'html')).toThrow(expect.objectContaining({ status: 406 }));
    expect(() => binaryRepresentation(undefined, 'ttl')).toThrow(expect.objectContaining({ status: 406 }));
  });
});

describe('parseForm', () => {
  it('gives one value per name, several when repeated, decoded', () => {
    const form = parseForm(Buffer.from('a=1&b=x+y&a=2&c=%C3%A9'));
    expect({ ...form }).toEqual({ a: ['1', '2'], b: 'x y', c: 'é' });
  });
});
