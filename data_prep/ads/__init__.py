"""ADS offline preprocessing by concern (the command and what it writes: :mod:`data_prep.ads_clusters`).

``settings`` (the command's options), ``texts`` (question + reference solution of each row),
``chunk_cache`` (resumable per-chunk model outputs), ``model_passes`` (embeddings and difficulty from the
models), ``clustering`` (PCA + K-Means, ranks in clusters), ``outputs`` (columns, summary, embeddings
table) and ``cluster_plot``.
"""
