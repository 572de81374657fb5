import { parseFhirPath } from '@medplum/core';
import { describe, expect, it } from 'vitest';
import { rootIdentifiers } from './shapes.js';

const roots = (expression: string) => {
  const result = rootIdentifiers(parseFhirPath(expression));
  return result ? [...result].sort() : undefined;
};

describe('rootIdentifiers', () => {
  it('collects the names an invariant starts its paths from', () => {
    expect(roots('name.exists() or telecom.exists() or address.exists() or organization.exists()')).toEqual([
      'address',
      'name',
      'organization',
      'telecom',
    ]);
    expect(roots('contained.meta.versionId.empty() and contained.meta.lastUpdated.empty()')).toEqual(['contained']);
    expect(roots('component.code.where(coding.intersect(%resource.code.coding).exists()).empty()')).toEqual([
      'component',
    ]);
  });

  it('gives up when the outcome may depend on more than those names', () => {
    expect(roots("reference.startsWith('#').not() or (reference in %rootResource.contained.id)")).toBeUndefined();
    expect(roots('hasValue() or (children().count() > id.count())')).toBeUndefined();
    expect(roots('$this.exists()')).toBeUndefined();
  });
});
