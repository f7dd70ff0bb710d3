/**
 * How the figures write numbers: thousands separated from 100 on, and ratios of two figures
 * rounded as the bench rounds (NaN when the denominator is not positive).
 */
import { round } from "../lib/stats.ts";

export const fmt = (value: number) => (Math.abs(value) >= 100 ? Math.round(value).toLocaleString("en-US") : String(value));
export const ratio = (numerator: number, denominator: number) => (denominator > 0 ? round(numerator / denominator) : Number.NaN);
