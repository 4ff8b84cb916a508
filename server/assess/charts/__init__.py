"""The dashboard's read models: server-side downsampled charts, run series, fit histories, comparisons and the
experiments list, all read from the stored assessment and points."""
