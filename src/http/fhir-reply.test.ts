import { describe, expect, it } from 'vitest';
import { negotiateFormat } from './fhir-reply.js';

const format = (accept: string | undefined, preferred?: 'json' | 'xml', _format?: string) =>
  negotiateFormat(_format, accept, preferred);

describe('negotiateFormat (https://hl7.org/fhir/R4/http.html#mime-type)', () => {
  it('answers JSON when nothing is said, or anything is acceptable', () => {
    for (const accept of [undefined, '', '*/*', 'application/*', 'application/fhir+json', 'application/json']) {
      expect(format(accept), String(accept)).toEqual({ format: 'json' });
    }
  });

  it('answers XML for the XML media types', () => {
    for (const accept of ['application/fhir+xml', 'application/xml', 'text/xml', 'application/xml+fhir', 'text/*']) {
      expect(format(accept), accept).toEqual({ format: 'xml' });
    }
  });

  it('weighs q-values, then the order of the ranges, then the more specific range', () => {
    expect(format('application/fhir+json;q=0.5, application/fhir+xml')).toEqual({ format: 'xml' });
    expect(format('application/fhir+xml;q=0.5, application/fhir+json')).toEqual({ format: 'json' });
    expect(format('application/fhir+xml, application/fhir+json')).toEqual({ format: 'xml' });
    expect(format('application/fhir+json, application/fhir+xml')).toEqual({ format: 'json' });
    // A browser: XML at 0.9 beats anything at 0.8.
    expect(format('text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8')).toEqual({ format: 'xml' });
    // `*/*` is not more specific than a refusal of JSON.
    expect(format('application/fhir+json;q=0, application/json;q=0, */*')).toEqual({ format: 'xml' });
    expect(format('application/fhir+xml;fhirVersion=3.0, application/json;q=0.1')).toEqual({ format: 'json' });
  });

  it("answers in the request body's format when Accept leaves the choice to the server", () => {
    expect(format(undefined, 'xml')).toEqual({ format: 'xml' });
    expect(format('*/*', 'xml')).toEqual({ format: 'xml' });
    expect(format('application/fhir+json', 'xml')).toEqual({ format: 'json' });
  });

  it('lets _format override Accept: json and xml, by name or media type', () => {
    for (const name of [
      'json',
      'application/json',
      'application/fhir+json',
      'application/fhir+json; fhirVersion=4.0',
    ]) {
      expect(format('application/fhir+xml', 'xml', name), name).toEqual({ format: 'json' });
    }
    for (const name of ['xml', 'text/xml', 'application/xml', 'application/fhir+xml', 'application/xml+fhir']) {
      expect(format('application/fhir+json', 'json', name), name).toEqual({ format: 'xml' });
    }
  });

  it('refuses (406) an Accept that admits neither, or an unknown _format', () => {
    for (const accept of [
      'text/plain',
      'image/png',
      'application/fhir+json;q=0, application/fhir+xml;q=0, application/json;q=0, application/xml;q=0, text/xml;q=0, application/xml+fhir;q=0',
      'application/fhir+json; fhirVersion=3.0',
    ]) {
      expect(format(accept), accept).toEqual({ refused: expect.stringMatching(/admits neither JSON nor XML/) });
    }
    for (const name of ['html', 'ttl', 'text/turtle']) {
      expect(format(undefined, 'json', name), name).toEqual({ refused: expect.stringMatching(/JSON .* and XML/) });
    }
  });
});
