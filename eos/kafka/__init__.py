"""A thin layer over aiokafka: client factories, producer fencing, read-to-end, topic admin."""

from eos.kafka.clients import ClientConfig as ClientConfig
from eos.kafka.clients import make_admin as make_admin
from eos.kafka.clients import make_client as make_client
from eos.kafka.clients import make_consumer as make_consumer
from eos.kafka.clients import make_producer as make_producer
from eos.kafka.fencing import ProducerIdentity as ProducerIdentity
from eos.kafka.fencing import fence_producers as fence_producers
from eos.kafka.read_to_end import TopicReader as TopicReader
from eos.kafka.read_to_end import read_to_end as read_to_end
