"""``python -m instir.interop ARGS``: the ``ir_datasets`` command (``export``, ``lookup``, ``list``
…) with the kit's datasets registered first, which the plain ``ir_datasets`` command cannot do:
ir_datasets 0.6 loads no other package's datasets (:func:`instir.interop.register_ir_datasets`)."""

import sys

from instir.interop.irds import ir_datasets, register_ir_datasets

register_ir_datasets()
ir_datasets.main(sys.argv[1:])
