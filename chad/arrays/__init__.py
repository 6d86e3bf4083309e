"""Arrays: build, index, fold, length, sum, map (seed 000 §7-8). Importing this
package registers the array rules with the evaluator, the transform and the
cotangent conversions."""
