import { describe, expect, it } from 'vitest';
import { addressCounterKey } from './rate-counters.js';

describe('addressCounterKey', () => {
  it('keeps IPv4 addresses, and IPv4-mapped IPv6 ones as IPv4', () => {
    expect(addressCounterKey('203.0.113.7')).toBe('203.0.113.7');
    expect(addressCounterKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressCounterKey('unknown')).toBe('unknown');
  });

  it('counts an IPv6 address by its /64, however it is written', () => {
    const key = '2001:db8:0:12::/64';
    for (const address of [
      '2001:db8:0:12::1',
      '2001:0db8:0000:0012:ffff:ffff:ffff:ffff',
      '2001:DB8::12:1:2:3:4',
      '2001:db8:0:12:1::9%eth0',
      '2001:db8:0:12::192.0.2.1',
    ]) {
      expect(addressCounterKey(address), address).toBe(key);
    }
    expect(addressCounterKey('2001:db8:0:13::1')).toBe('2001:db8:0:13::/64');
    expect(addressCounterKey('::1')).toBe('0:0:0:0::/64');
  });
});
