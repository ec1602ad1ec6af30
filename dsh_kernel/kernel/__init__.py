"""The Jupyter kernel: cell routing, chat cells, %%sql cells, the %agent magic, kernelspecs.

Only this package imports ipykernel/IPython kernel machinery.
"""
