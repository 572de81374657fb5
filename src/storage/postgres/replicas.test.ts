import { describe, expect, it } from 'vitest';
import { walPosition } from '../write-positions.js';
import { ReplicaSet } from './replicas.js';

function fakeCluster() {
  const state = {
    clock: 0,
    primary: '0/100',
    replicas: new Map<string, string | Error>([
      ['r1', '0/100'],
      ['r2', '0/100'],
    ]),
  };
  const set = new ReplicaSet(
    ['r1', 'r2'],
    {
      primaryPosition: async () => state.primary,
      replayedPosition: async (url) => {
        const answer = state.replicas.get(url)!;
        if (answer instanceof Error) throw answer;
        return answer;
      },
    },
    1000,
    () => state.clock,
  );
  return { state, set };
}

describe('WAL positions', () => {
  it('compares as numbers, high word first', () => {
    expect(walPosition('0/16B3748')).toBe(0x16b3748n);
    expect(walPosition('1/0')! > walPosition('0/FFFFFFFF')!).toBe(true);
    expect(walPosition('garbage')).toBeUndefined();
    expect(walPosition('1/2/3')).toBeUndefined();
  });
});

/** The replica chosen, or why the primary answers. */
const pick = (set: ReplicaSet, after: string | undefined): string => {
  const choice = set.choose(after);
  return 'url' in choice ? choice.url : `primary:${choice.primary}`;
};

describe('replica choice', () => {
  it('uses no replica before the first poll, then each up-to-date one in turn', async () => {
    const { set } = fakeCluster();
    expect(pick(set, undefined)).toBe('primary:none');
    await set.poll();
    expect([pick(set, undefined), pick(set, undefined), pick(set, undefined)]).toEqual(['r1', 'r2', 'r1']);
  });

  it("sends a caller's search only to a replica that replayed its last write", async () => {
    const { state, set } = fakeCluster();
    state.primary = '0/200';
    state.replicas.set('r1', '0/200');
    state.replicas.set('r2', '0/180');
    await set.poll();
    expect(pick(set, '0/1F0')).toBe('r1');
    expect(pick(set, '0/1F0')).toBe('r1');
    expect(pick(set, '0/201')).toBe('primary:own-write');
    expect(pick(set, 'not-a-position')).toBe('primary:own-write');
  });

  it('leaves out a replica that lags more than allowed, and one that fails, until it catches up', async () => {
    const { state, set } = fakeCluster();
    await set.poll();
    state.clock = 500;
    state.primary = '0/300';
    state.replicas.set('r2', '0/100');
    await set.poll();
    // r2 stands where the primary stood at the first poll; the primary passed it at the second (500 ms ago, now at 500).
    state.clock = 2000;
    state.primary = '0/400';
    state.replicas.set('r1', '0/400');
    await set.poll();
    expect(set.status().find((s) => s.url === 'r2')!.lagMs).toBe(1500);
    expect([pick(set, undefined), pick(set, undefined)]).toEqual(['r1', 'r1']);

    state.replicas.set('r1', new Error('connection refused'));
    await set.poll();
    expect(pick(set, undefined)).toBe('primary:none');

    state.replicas.set('r1', '0/400');
    state.replicas.set('r2', '0/400');
    await set.poll();
    expect(new Set([pick(set, undefined), pick(set, undefined)])).toEqual(new Set(['r1', 'r2']));
    set.failed('r2');
    expect([pick(set, undefined), pick(set, undefined)]).toEqual(['r1', 'r1']);
  });

  it('leaves out a replica whose position read does not answer, and polls on', async () => {
    let hang = false;
    const set = new ReplicaSet(
      ['r1'],
      {
        primaryPosition: async () => '0/100',
        replayedPosition: () => (hang ? new Promise<string>(() => undefined) : Promise.resolve('0/100')),
      },
      1000,
      Date.now,
      20,
    );
    await set.poll();
    expect(pick(set, undefined)).toBe('r1');
    hang = true;
    await set.poll();
    expect(pick(set, undefined)).toBe('primary:none');
    hang = false;
    await set.poll();
    expect(pick(set, undefined)).toBe('r1');
  });
});
