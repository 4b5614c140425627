import { describe, expect, it } from 'vitest';
import { DEFAULT_SAMPLING, type SamplingParams } from '@fastkernels/model-zoo';
import { ControlReceiver, ControlSender, applyControl, decodeControl, encodeControl, followControl, openControlChannel, type ControlMessage, type ControlOp } from './serve-control.js';

const params = (over: Partial<SamplingParams> = {}): SamplingParams => ({ ...DEFAULT_SAMPLING, ...over });

describe('serve --tp control messages', () => {
  it('round-trip: adds (exact float64 sampling parameters, stop ids, ignore_eos), aborts, empty steps, shutdown', () => {
    const msgs: ControlMessage[] = [
      { seq: 0, ops: [], step: true, shutdown: false }, // an empty step (nothing new since the last one)
      {
        seq: 1, step: true, shutdown: false,
        ops: [
          { kind: 'add', requestId: 0, promptIds: [1, 2, 3], params: params({ maxTokens: 5 }) },
          { kind: 'add', requestId: 1, promptIds: [31999], params: params({ temperature: 0.8, topP: 0.9, topK: 20, seed: 2 ** 40 + 3, maxTokens: 7, ignoreEos: true }) },
          { kind: 'add', requestId: 2, promptIds: [0], params: params({ stopTokenIds: [2, 128001], temperature: 1 / 3 }) },
          { kind: 'add', requestId: 3, promptIds: [5], params: params({ stopTokenIds: [] }) },
          { kind: 'add', requestId: 4, promptIds: [6, 7], params: params({ logprobs: 5, stopTokenIds: [9] }) },
          { kind: 'add', requestId: 5, promptIds: [8], params: params({ logprobs: 0 }) },
          { kind: 'abort', requestId: 1 },
        ],
      },
      { seq: 2, ops: [{ kind: 'abort', requestId: 0 }, { kind: 'abort', requestId: 99 }], step: false, shutdown: false }, // cancellations only
      { seq: 3, ops: [{ kind: 'abort', requestId: 2 }], step: false, shutdown: true },
      { seq: 4, ops: [], step: false, shutdown: true },
    ];
    for (const m of msgs) {
      const words = encodeControl(m);
      expect(words).toBeInstanceOf(Int32Array);
      expect(decodeControl(words)).toEqual(m);
    }
    expect(encodeControl(msgs[0]!).length).toBe(4); // just the header
    const d = decodeControl(encodeControl(msgs[1]!)).ops[1] as Extract<ControlOp, { kind: 'add' }>;
    expect(d.params.temperature).toBe(0.8);
    expect(d.params.seed).toBe(2 ** 40 + 3);
  });

  it('partial parameters travel merged with the defaults (what addRequest does with them)', () => {
    const m = decodeControl(encodeControl({ seq: 0, step: true, shutdown: false, ops: [{ kind: 'add', requestId: 4, promptIds: [7], params: { maxTokens: 3 } as SamplingParams }] }));
    expect((m.ops[0] as Extract<ControlOp, { kind: 'add' }>).params).toEqual(params({ maxTokens: 3 }));
  });

  it('refuses malformed messages: bad magic, truncated, trailing words, unknown op, non-int32 ids', () => {
    const good = encodeControl({ seq: 0, step: true, shutdown: false, ops: [{ kind: 'add', requestId: 0, promptIds: [1, 2], params: params() }] });
    expect(() => decodeControl(Int32Array.from([1, 2, 3, 4]))).toThrow(/bad magic/);
    expect(() => decodeControl(good.subarray(0, good.length - 1))).toThrow(/truncated/);
    expect(() => decodeControl(Int32Array.from([...good, 0]))).toThrow(/1 words past its end/);
    const bad = Int32Array.from(good);
    bad[4] = 9;
    expect(() => decodeControl(bad)).toThrow(/unknown op 9/);
    expect(() => encodeControl({ seq: 0, step: true, shutdown: false, ops: [{ kind: 'add', requestId: 0, promptIds: [2 ** 31], params: params() }] })).toThrow(/token id 2147483648 is not an int32/);
  });

  it('applyControl: ops in order, then a step; shutdown leaves without stepping; a diverged request id is an error', () => {
    const log: string[] = [];
    let next = 0;
    const engine = {
      addRequest: (p: readonly number[]) => (log.push(`add ${p.join(',')}`), next++),
      abortRequest: (id: number) => (log.push(`abort ${id}`), true),
      step: () => log.push('step'),
    };
    expect(applyControl(engine, { seq: 0, step: true, shutdown: false, ops: [{ kind: 'add', requestId: 0, promptIds: [1], params: params() }, { kind: 'abort', requestId: 0 }] })).toBe(false);
    expect(applyControl(engine, { seq: 1, step: true, shutdown: false, ops: [] })).toBe(false);
    expect(applyControl(engine, { seq: 2, step: false, shutdown: true, ops: [{ kind: 'add', requestId: 1, promptIds: [2], params: params() }] })).toBe(true);
    expect(log).toEqual(['add 1', 'abort 0', 'step', 'step', 'add 2']);
    expect(() => applyControl(engine, { seq: 3, step: true, shutdown: false, ops: [{ kind: 'add', requestId: 7, promptIds: [3], params: params() }] })).toThrow(/request id 2 where rank 0 gave 7: the ranks' engines diverged/);
  });
});

/** W ranks' channels in this process (real sockets on 127.0.0.1); the port exchange stands in for the group's all-reduce. */
async function channels(world: number, token = 'tok'): Promise<[ControlSender, ...ControlReceiver[]]> {
  let give!: (p: number) => void;
  const port = new Promise<number>((ok) => (give = ok));
  const opened = Array.from({ length: world }, (_, rank) => openControlChannel({
    rank, world, token,
    exchangePort: (p) => {
      if (rank === 0) give(p);
      return port;
    },
  }));
  return (await Promise.all(opened)) as [ControlSender, ...ControlReceiver[]];
}

describe('serve --tp control channel over local sockets', () => {
  it('every rank gets every message in order (large ones too); all leave at the shutdown', async () => {
    const [sender, ...receivers] = await channels(3);
    const big = Array.from({ length: 300_000 }, (_, i) => i % 32000); // ~1.2 MB: more than one socket write
    const seen = receivers.map(() => [] as ControlMessage[]);
    const fake = () => ({ n: 0, addRequest(this: { n: number }) { return this.n++; }, abortRequest: () => true, step: () => {} });
    const follow = receivers.map((r, i) => followControl(fake(), r, (m) => seen[i]!.push(m)));
    await sender.send({ ops: [{ kind: 'add', requestId: 0, promptIds: [1, 2], params: params() }], step: true, shutdown: false });
    await sender.send({ ops: [], step: true, shutdown: false });
    await sender.send({ ops: [{ kind: 'add', requestId: 1, promptIds: big, params: params() }, { kind: 'abort', requestId: 0 }], step: true, shutdown: false });
    await sender.send({ ops: [], step: false, shutdown: true });
    await Promise.all(follow);
    for (const s of seen) {
      expect(s.map((m) => m.seq)).toEqual([0, 1, 2, 3]);
      expect(s.map((m) => m.shutdown)).toEqual([false, false, false, true]);
      expect((s[2]!.ops[0] as Extract<ControlOp, { kind: 'add' }>).promptIds).toEqual(big);
    }
    sender.close();
    for (const r of receivers) r.close();
    expect(sender.peerLost).toBeNull(); // closing after the shutdown is not a lost rank
  });

  it('a rank that goes away: rank 0 hears of it (onPeerLost) and its next send fails with the rank named', async () => {
    const [sender, r1, r2] = await channels(3);
    const lost = new Promise<string>((ok) => (sender.onPeerLost = ok));
    r2!.close();
    expect(await lost).toMatch(/tensor-parallel rank 2 closed the serve control channel/);
    await expect(sender.send({ ops: [], step: true, shutdown: false })).rejects.toThrow(/rank 2/);
    sender.close();
    r1!.close();
  });

  it('rank 0 going away without a shutdown: the waiting ranks fail with a clear error', async () => {
    const [sender, r1] = await channels(2);
    const waiting = r1!.next();
    sender.close();
    await expect(waiting).rejects.toThrow(/rank 0 closed the control channel without a shutdown/);
  });

  it('a hello with the wrong token is refused: rank 0 keeps waiting (and gives up at its deadline)', async () => {
    let give!: (p: number) => void;
    const port = new Promise<number>((ok) => (give = ok));
    const zero = openControlChannel({ rank: 0, world: 2, token: 'right', connectTimeoutMs: 800, exchangePort: (p) => (give(p), p) });
    const one = openControlChannel({ rank: 1, world: 2, token: 'wrong', exchangePort: () => port });
    await expect(zero).rejects.toThrow(/1 rank\(s\) did not join the control channel/);
    const r = (await one) as ControlReceiver;
    await expect(r.next()).rejects.toThrow(/rank 0 closed the control channel|control channel/);
  });
});
