/**
 * fast-check building blocks for the property tests that hold a hand-written shortcut equal to the
 * zod schema it shortcuts: bodies mostly as a real party sends them, now and then anything else.
 */
import fc from 'fast-check';

/** A value of any JSON kind, for a field a generator now and then fills with anything. */
export const junk: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.string({ maxLength: 5 }),
  fc.constant([]),
  fc.constant({}),
);

/** `usual`, and one time in `odds + 1` junk. */
export const mostly = <T>(usual: fc.Arbitrary<T>, odds = 6): fc.Arbitrary<unknown> =>
  fc.oneof({ arbitrary: usual as fc.Arbitrary<unknown>, weight: odds }, { arbitrary: junk, weight: 1 });

/** Absent (JSON drops an undefined field), and one time in `odds + 1` present. */
export const rarely = <T>(value: fc.Arbitrary<T>, odds = 6): fc.Arbitrary<unknown> =>
  fc.oneof(
    { arbitrary: fc.constant(undefined), weight: odds },
    { arbitrary: value as fc.Arbitrary<unknown>, weight: 1 },
  );
