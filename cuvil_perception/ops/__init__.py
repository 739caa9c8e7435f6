"""Built-in ops. Importing this package registers them all."""
from . import yolo  # noqa: F401
from . import sources, sinks, lidar  # noqa: F401
from . import bag_source, mcap_sink  # noqa: F401
from . import pillars  # noqa: F401
from . import fusion  # noqa: F401
