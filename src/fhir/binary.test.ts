import { describe, expect, it } from 'vitest';
import {
  binaryContent,
  binaryContentType,
  binaryFromRaw,
  isBinaryResource,
  binaryContextReadable,
  RawContent,
  securityContextReference,
  securityContextType,
} from './binary.js';
import { ReferenceParser } from './references.js';

const isResourceType = (name: string) => ['Patient', 'DocumentReference'].includes(name);

describe('binaryContentType', () => {
  it('lower-cases type and subtype, keeps parameters and their values as sent', () => {
    expect(binaryContentType('Application/PDF')).toBe('application/pdf');
    expect(binaryContentType('text/plain;Charset=ISO-8859-1')).toBe('text/plain; charset=ISO-8859-1');
    expect(binaryContentType('text/plain ;  charset=utf-8 ; format=flowed')).toBe(
      'text/plain; charset=utf-8; format=flowed',
    );
    expect(binaryContentType('multipart/mixed; boundary="a;b"')).toBe('multipart/mixed; boundary="a;b"');
  });

  it('takes no header as application/octet-stream (RFC 9110 §8.3)', () => {
    expect(binaryContentType(undefined)).toBe('application/octet-stream');
    expect(binaryContentType('  ')).toBe('application/octet-stream');
  });

  it('refuses what is no media type with a 415', () => {
    for (const header of [
      'pdf',
      'text/',
      '/plain',
      'text/plain; charset',
      'a b/c',
      'text/plain; x="a  b"',
      'text/plain; name="é"',
    ]) {
      expect(() => binaryContentType(header), header).toThrow(expect.objectContaining({ status: 415 }));
    }
  });
});

describe('securityContextReference', () => {
  it('takes Type/id of a known type', () => {
    expect(securityContextReference(undefined, isResourceType)).toBeUndefined();
    expect(securityContextReference(' Patient/p-1 ', isResourceType)).toEqual({ reference: 'Patient/p-1' });
  });

  it('refuses anything else with a 400', () => {
    for (const header of ['', 'Patient', 'Patient/', 'Nope/1', 'Patient/a/b', 'Patient/..', 'http://x/Patient/1']) {
      expect(() => securityContextReference(header, isResourceType), header).toThrow(
        expect.objectContaining({ status: 400 }),
      );
    }
  });
});

describe('binaryFromRaw and binaryContent', () => {
  const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

  it('stores every byte value and gives them back', () => {
    const resource = binaryFromRaw(new RawContent('application/pdf', bytes), { reference: 'Patient/1' }, 'b1');
    expect(resource).toEqual({
      resourceType: 'Binary',
      id: 'b1',
      contentType: 'application/pdf',
      securityContext: { reference: 'Patient/1' },
      data: bytes.toString('base64'),
    });
    const content = binaryContent(JSON.stringify(resource));
    expect(content.contentType).toBe('application/pdf');
    expect(content.bytes.equals(bytes)).toBe(true);
  });

  it('serves a stored contentType that is no ASCII media type as application/octet-stream', () => {
    for (const contentType of ['text/plain; name="€"', 'pdf', undefined]) {
      expect(binaryContent({ contentType, data: 'AAEC' }).contentType, String(contentType)).toBe(
        'application/octet-stream',
      );
    }
  });

  it('refuses empty content (400) and reads a Binary without data as no bytes', () => {
    expect(() => binaryFromRaw(new RawContent('text/plain', Buffer.alloc(0)), undefined)).toThrow(
      expect.objectContaining({ status: 400 }),
    );
    expect(binaryContent({ resourceType: 'Binary', contentType: 'text/plain' }).bytes.length).toBe(0);
  });

  it('tells a Binary resource from other JSON', () => {
    expect(isBinaryResource({ resourceType: 'Binary', contentType: 'text/plain' })).toBe(true);
    for (const other of [{ resourceType: 'Patient' }, [{ resourceType: 'Binary' }], 'Binary', null, undefined]) {
      expect(isBinaryResource(other)).toBe(false);
    }
  });
});

describe('securityContextType and binaryContextReadable on stored text', () => {
  const references = new ReferenceParser('https://fhir.example/fhir', isResourceType);
  const stored = (fields: Record<string, unknown>) =>
    JSON.stringify({ resourceType: 'Binary', id: 'b', contentType: 'text/plain', ...fields, data: 'AAAA' });

  it('finds the context wherever the key stands, and only the key', () => {
    expect(securityContextType(stored({}), references)).toBeUndefined();
    const late = JSON.stringify({ resourceType: 'Binary', data: 'AAAA', securityContext: { reference: 'Patient/1' } });
    expect(securityContextType(late, references)).toBe('Patient');
    expect(
      securityContextType(
        stored({ securityContext: { reference: 'https://fhir.example/fhir/Patient/1' } }),
        references,
      ),
    ).toBe('Patient');
    expect(securityContextType(stored({ securityContext: { identifier: { value: 'x' } } }), references)).toBe('*');
    // The word inside a value (escaped quotes, a value ending in it) is no context.
    expect(securityContextType(stored({ contentType: 'text/x; a="securityContext"' }), references)).toBeUndefined();
    expect(securityContextType(stored({ meta: { tag: [{ code: '"securityContext' }] } }), references)).toBeUndefined();
  });

  it('reads content attached to a type only with read access to it, to nothing of this server only with every type', () => {
    const types = ['Patient', 'DocumentReference'];
    const patientOnly = (type: string) => type === 'Patient';
    const attached = stored({ securityContext: { reference: 'Patient/1' } });
    const elsewhere = stored({ securityContext: { reference: 'https://other.example/fhir/Patient/1' } });
    expect(binaryContextReadable(stored({}), references, types, () => false)).toBe(true);
    expect(binaryContextReadable(attached, references, types, patientOnly)).toBe(true);
    expect(binaryContextReadable(attached, references, types, (type) => type === 'DocumentReference')).toBe(false);
    expect(binaryContextReadable(elsewhere, references, types, patientOnly)).toBe(false);
    expect(binaryContextReadable(elsewhere, references, types, () => true)).toBe(true);
  });
});
